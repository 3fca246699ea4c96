//go:build e2e

package framework

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Modules whose manifests the control plane installs. Their versions are the
// ones the main module's build list selects (go.mod), i.e. the same versions
// whose Go types the tests and Kueue are compiled against.
const (
	kueueModule   = "sigs.k8s.io/kueue"
	trainerModule = "github.com/kubeflow/trainer/v2"
	jobsetModule  = "sigs.k8s.io/jobset"
	// The Training Operator v1 (PyTorchJob, TFJob), whose Go types Kueue's
	// kubeflow integrations are built with.
	trainingOperatorModule = "github.com/kubeflow/training-operator"
	// The MPI Operator (MPIJob, kubeflow.org/v2beta1), likewise.
	mpiOperatorModule = "github.com/kubeflow/mpi-operator"
)

// BinaryDir returns the directory holding kube-apiserver and etcd: $PLANNER_TESTBIN
// or ~/.cache/progress-planner/testbin/k8s-<v>-etcd-<v>, as hack/build-testbins.sh
// writes it.
func BinaryDir() string {
	if d := os.Getenv("PLANNER_TESTBIN"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.Getenv("HOME")
	}
	return filepath.Join(home, ".cache", "progress-planner", "testbin",
		"k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion)
}

// checkBinaries fails (never skips) when a binary is missing or not executable.
func checkBinaries(dir string) (apiserver, etcd string, err error) {
	apiserver = filepath.Join(dir, "kube-apiserver")
	etcd = filepath.Join(dir, "etcd")
	var missing []string
	for _, p := range []string{apiserver, etcd} {
		fi, statErr := os.Stat(p)
		if statErr != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "", "", fmt.Errorf("control-plane binaries missing: %s; build them with `make testbins` "+
			"(hack/build-testbins.sh; set PLANNER_TESTBIN to use another directory)", strings.Join(missing, ", "))
	}
	return apiserver, etcd, nil
}

// moduleDirs returns the module-cache directory of each module in the main
// module's build list, via `go list -m`. A module that is not downloaded is an
// error naming the command that fetches it.
func moduleDirs(modules ...string) (map[string]string, error) {
	dirs, _, err := moduleDirsVersions(modules...)
	return dirs, err
}

// moduleDirsVersions is moduleDirs plus each module's selected version.
func moduleDirsVersions(modules ...string) (dirs, versions map[string]string, err error) {
	args := append([]string{"list", "-m", "-json"}, modules...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list -m %s: %v: %s", strings.Join(modules, " "), err, strings.TrimSpace(stderr.String()))
	}
	dirs, versions = map[string]string{}, map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct {
			Path, Version, Dir string
			Replace            *struct{ Path, Version, Dir string }
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("decoding go list -m output: %w", err)
		}
		dir, version := m.Dir, m.Version
		if m.Replace != nil && m.Replace.Dir != "" {
			dir = m.Replace.Dir
		}
		if m.Replace != nil && m.Replace.Version != "" {
			version = m.Replace.Version
		}
		if dir == "" {
			return nil, nil, fmt.Errorf("module %s@%s is not in the module cache: run `go mod download %s`", m.Path, m.Version, m.Path)
		}
		dirs[m.Path] = dir
		versions[m.Path] = version
	}
	for _, m := range modules {
		if dirs[m] == "" {
			return nil, nil, fmt.Errorf("module %s is not in the main module's build list (go.mod)", m)
		}
	}
	return dirs, versions, nil
}

// manifests are the files the control plane installs, resolved from the
// module cache.
type manifests struct {
	crdPaths     []string // CRD files
	webhookFile  string   // Kueue's webhook manifests
	torchRuntime string   // trainer's torch-distributed ClusterTrainingRuntime
}

func findManifests() (*manifests, error) {
	dirs, versions, err := moduleDirsVersions(kueueModule, trainerModule, jobsetModule, trainingOperatorModule, mpiOperatorModule)
	if err != nil {
		return nil, err
	}
	// The manifests come from the build list that `go list -m` sees (go.mod,
	// or GOFLAGS=-modfile=test/compat/kueue-v017.mod); the Go code was
	// compiled for the pair named by the build tags. A mix would install one
	// version's CRDs for the other's controllers.
	if versions[kueueModule] != KueueVersion || versions[trainerModule] != TrainerVersion {
		return nil, fmt.Errorf("the build list selects Kueue %s and Trainer %s but this test binary was built for Kueue %s and Trainer %s: "+
			"run the old pair with `make e2e-compat` (build tag kueue_v017 and GOFLAGS=-modfile=test/compat/kueue-v017.mod together)",
			versions[kueueModule], versions[trainerModule], KueueVersion, TrainerVersion)
	}
	m := &manifests{}
	kueueCRDs, err := filepath.Glob(filepath.Join(dirs[kueueModule], "config", "components", "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(kueueCRDs) == 0 {
		return nil, fmt.Errorf("no Kueue CRDs under %s/config/components/crd/bases", dirs[kueueModule])
	}
	m.crdPaths = append(m.crdPaths, kueueCRDs...)
	for _, f := range []string{
		filepath.Join(dirs[trainerModule], "manifests", "base", "crds", "trainer.kubeflow.org_trainjobs.yaml"),
		filepath.Join(dirs[trainerModule], "manifests", "base", "crds", "trainer.kubeflow.org_trainingruntimes.yaml"),
		filepath.Join(dirs[trainerModule], "manifests", "base", "crds", "trainer.kubeflow.org_clustertrainingruntimes.yaml"),
		filepath.Join(dirs[jobsetModule], "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"),
		filepath.Join(dirs[trainingOperatorModule], "manifests", "base", "crds", "kubeflow.org_pytorchjobs.yaml"),
		filepath.Join(dirs[trainingOperatorModule], "manifests", "base", "crds", "kubeflow.org_tfjobs.yaml"),
		filepath.Join(dirs[mpiOperatorModule], "manifests", "base", "kubeflow.org_mpijobs.yaml"),
	} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("CRD manifest missing: %w", err)
		}
		m.crdPaths = append(m.crdPaths, f)
	}
	m.webhookFile = filepath.Join(dirs[kueueModule], "config", "components", "webhook", "manifests.yaml")
	m.torchRuntime = filepath.Join(dirs[trainerModule], "manifests", "base", "runtimes", "torch_distributed.yaml")
	for _, f := range []string{m.webhookFile, m.torchRuntime} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("manifest missing: %w", err)
		}
	}
	return m, nil
}

// optionalWebhooks are the path fragments of the webhooks of the
// integrations a control plane enables only when asked
// (Options.Frameworks), by framework name.
var optionalWebhooks = []struct{ framework, fragment string }{
	{BatchJobFramework, "-batch-v1-job"},
	{PyTorchJobFramework, "-kubeflow-org-v1-pytorchjob"},
	{TFJobFramework, "-kubeflow-org-v1-tfjob"},
	{MPIJobFramework, "-kubeflow-org-v2beta1-mpijob"},
}

// servedWebhookGroups are the path fragments of the webhooks this process
// serves: Kueue's own API and the TrainJob and JobSet integrations (always
// enabled), and those of optionalWebhooks whose framework is enabled.
// Kueue's manifest also lists webhooks for Pods, Deployments and other
// integrations that are not linked in here; registering those would make
// the apiserver reject every such object (failurePolicy: Fail, no
// handler).
func servedWebhookGroups(frameworks []string) []string {
	groups := []string{"-kueue-x-k8s-io-", "-trainer-kubeflow-org-", "-jobset-x-k8s-io-"}
	for _, w := range optionalWebhooks {
		if slices.Contains(frameworks, w.framework) {
			groups = append(groups, w.fragment)
		}
	}
	return groups
}

// servedHere reports whether a webhook's service path is one of groups,
// the in-process Kueue webhooks (served).
func servedHere(cc admissionv1.WebhookClientConfig, groups []string) bool {
	if cc.Service == nil || cc.Service.Path == nil {
		return false
	}
	for _, g := range groups {
		if strings.Contains(*cc.Service.Path, g) {
			return true
		}
	}
	return false
}

// loadWebhooks reads Kueue's webhook manifests and keeps the webhooks served
// in-process (of the enabled frameworks). envtest rewrites their clientConfig
// to its local webhook server.
func loadWebhooks(file string, frameworks []string) ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	groups := servedWebhookGroups(frameworks)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var (
		muts []*admissionv1.MutatingWebhookConfiguration
		vals []*admissionv1.ValidatingWebhookConfiguration
	)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", file, err)
			}
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionv1.MutatingWebhook) bool { return !servedHere(w.ClientConfig, groups) })
			muts = append(muts, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", file, err)
			}
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionv1.ValidatingWebhook) bool { return !servedHere(w.ClientConfig, groups) })
			vals = append(vals, c)
		}
	}
	if len(muts) == 0 || len(vals) == 0 {
		return nil, nil, fmt.Errorf("%s: no mutating or no validating webhook configuration", file)
	}
	return muts, vals, nil
}
