package charts

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/release/internal/testbin"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Renders checked against golden files: chart, release name, namespace,
// values file (none: the chart's defaults).
var renders = []struct {
	golden, chart, release, namespace, values string
}{
	{"progress-planner-default.yaml", "progress-planner", "progress-planner", "progress-planner-system", ""},
	{"progress-planner-custom.yaml", "progress-planner", "planner", "ml-platform", "testdata/values-custom.yaml"},
	{"progress-planner-monitoring.yaml", "progress-planner", "progress-planner", "progress-planner-system", "testdata/values-monitoring.yaml"},
	{"planner-scheduler-default.yaml", "planner-scheduler", "planner-scheduler", "kube-system", ""},
	{"planner-scheduler-coscheduling.yaml", "planner-scheduler", "planner-scheduler", "kube-system", "../../charts/planner-scheduler/values-coscheduling.yaml"},
}

func chartDir(name string) string { return filepath.Join("..", "..", "charts", name) }

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Render is `helm template NAME CHART -n NAMESPACE -f VALUES`.
func Render(t *testing.T, chartPath, release, namespace string, vals map[string]any) string {
	t.Helper()
	ch, err := loader.Load(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	return render(t, ch, release, namespace, vals)
}

func render(t *testing.T, ch *chart.Chart, release, namespace string, vals map[string]any) string {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"}
	rel, err := inst.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm template %s: %v", ch.Name(), err)
	}
	return rel.Manifest
}

func TestHelmLint(t *testing.T) {
	for _, r := range renders {
		l := lint.AllWithKubeVersion(chartDir(r.chart), readValues(t, r.values), r.namespace, &chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"})
		for _, m := range l.Messages {
			// helm lint fails on errors and, with --strict, on warnings: fail on both.
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %s (%s): %s", r.chart, r.values, m)
			} else {
				t.Logf("helm lint %s: %s", r.chart, m)
			}
		}
	}
}

func TestHelmTemplateGolden(t *testing.T) {
	for _, r := range renders {
		t.Run(r.golden, func(t *testing.T) {
			got := Render(t, chartDir(r.chart), r.release, r.namespace, readValues(t, r.values))
			file := filepath.Join("testdata", r.golden)
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test ./charts -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("helm template differs from %s (go test ./charts -update rewrites it after review):\n%s", file, firstDiff(string(want), got))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n- " + x + "\n+ " + y
		}
	}
	return ""
}

// objects splits a rendered manifest into objects.
func objects(t *testing.T, manifest string) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func find(objs []map[string]any, kind, nameSuffix string) map[string]any {
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && strings.HasSuffix(md["name"].(string), nameSuffix) {
			return o
		}
	}
	return nil
}

func path(o map[string]any, keys ...string) any {
	var cur any = o
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// TestChartContents checks what the golden diff alone would not: the config
// the chart writes passes the planner's own strict validation with the
// values' mode, the CRD and the RBAC rules are the shipped ones
// (config/crd, config/rbac), and the workload knobs land where they must.
func TestChartContents(t *testing.T) {
	for _, r := range renders[:3] {
		t.Run(r.golden, func(t *testing.T) {
			vals := readValues(t, r.values)
			objs := objects(t, Render(t, chartDir(r.chart), r.release, r.namespace, vals))
			cm := find(objs, "ConfigMap", "-config")
			if cm == nil {
				t.Fatal("no config ConfigMap")
			}
			// The planner itself validates it, strictly (unknown fields,
			// ranges), as it would at start in the pod.
			cfg := printConfig(t, path(cm, "data", "config.yaml").(string))
			wantMode := "advise"
			if m, ok := vals["mode"].(string); ok {
				wantMode = m
			}
			if path(cfg, "policy", "mode") != wantMode || path(cfg, "leaderElection", "enabled") != true {
				t.Errorf("config: mode %v, leader election %v", path(cfg, "policy", "mode"), path(cfg, "leaderElection", "enabled"))
			}
			dep := find(objs, "Deployment", "")
			if dep == nil {
				t.Fatal("no Deployment")
			}
			if r.values == "" {
				if n := path(dep, "spec", "replicas"); n != float64(2) && n != int64(2) {
					t.Errorf("replicas %v, want 2", n)
				}
				if find(objs, "PodDisruptionBudget", "") == nil {
					t.Error("no PodDisruptionBudget with 2 replicas")
				}
			}
			if find(objs, "Service", "-metrics") == nil {
				t.Error("no metrics Service")
			}
			crd := find(objs, "CustomResourceDefinition", "progressforecasts.planner.progress.io")
			shipped := readYAML(t, "../../config/crd/bases/planner.progress.io_progressforecasts.yaml")
			if !reflect.DeepEqual(crd, shipped) {
				t.Error("the chart's CRD differs from config/crd/bases (make manifests, then copy it into charts/progress-planner/templates/crd.yaml)")
			}
			role := find(objs, "ClusterRole", r.release)
			shippedRole := readYAML(t, "../../config/rbac/role.yaml")
			for _, rule := range shippedRole["rules"].([]any) {
				if !containsRule(role["rules"].([]any), rule) {
					t.Errorf("the chart's ClusterRole lacks the shipped rule %v", rule)
				}
			}
			spec := path(dep, "spec", "template", "spec").(map[string]any)
			args := strings.Join(toStrings(path(spec, "containers").([]any)[0].(map[string]any)["args"]), " ")
			if r.values == "testdata/values-custom.yaml" {
				for k, want := range map[string]any{"priorityClassName": "system-cluster-critical"} {
					if spec[k] != want {
						t.Errorf("%s = %v", k, spec[k])
					}
				}
				if spec["nodeSelector"] == nil || spec["tolerations"] == nil {
					t.Error("nodeSelector/tolerations not set")
				}
				if !strings.Contains(args, "--ui-addr=:8082") {
					t.Errorf("UI on: args %q lack a host-less (loopback) --ui-addr", args)
				}
				if find(objs, "ServiceMonitor", "") != nil {
					t.Error("ServiceMonitor rendered although off")
				}
				checkProgressEndpoint(t, objs, args, cfg)
				checkPodWebhook(t, objs, args, cfg)
			} else if strings.Contains(args, "--ui-addr") {
				t.Errorf("UI off by default, args %q", args)
			}
			if r.values != "testdata/values-custom.yaml" && (strings.Contains(args, "--progress-endpoint") || find(objs, "Service", "-progress") != nil || find(objs, "MutatingWebhookConfiguration", "") != nil) {
				t.Errorf("progress endpoint rendered although off: args %q", args)
			}
			// The planner accepts the Deployment's command line as it is.
			argv := toStrings(path(spec, "containers").([]any)[0].(map[string]any)["args"])
			checkArgs(t, argv, path(cm, "data", "config.yaml").(string))
			if !strings.Contains(args, "--metrics-secure=true") {
				t.Errorf("metrics not secure by default: %q", args)
			}
		})
	}
}

// checkProgressEndpoint: with progressEndpoint.enabled the Deployment
// serves it, its Service exists and is the one the certificate is for, and
// the chart grants the shipped rules of config/rbac/progress_endpoint_role.yaml.
func checkProgressEndpoint(t *testing.T, objs []map[string]any, args string, cfg map[string]any) {
	t.Helper()
	if !strings.Contains(args, "--progress-endpoint-bind-address=:9443") {
		t.Errorf("progress endpoint on: args %q", args)
	}
	svc := find(objs, "Service", "-progress")
	if svc == nil {
		t.Fatal("no progress endpoint Service")
	}
	if name := path(svc, "metadata", "name"); path(cfg, "progressEndpoint", "serviceName") != name {
		t.Errorf("certificate for Service %v, the Service is %v", path(cfg, "progressEndpoint", "serviceName"), name)
	}
	b, err := os.ReadFile("../../config/rbac/progress_endpoint_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped := objects(t, string(b))
	for _, kind := range []string{"ClusterRole", "Role"} {
		want, got := find(shipped, kind, ""), find(objs, kind, "-progress-endpoint"+map[string]string{"Role": "-certs"}[kind])
		if want == nil || got == nil {
			t.Fatalf("%s: shipped %v, chart %v", kind, want != nil, got != nil)
		}
		if !reflect.DeepEqual(want["rules"], got["rules"]) {
			t.Errorf("the chart's progress endpoint %s rules %v differ from the shipped %v", kind, got["rules"], want["rules"])
		}
	}
}

// checkPodWebhook: with progressEndpoint.podWebhook.enabled the webhook's
// configuration reaches the planner's port through the endpoint's Service
// (whose names the certificate carries), fails open, is the one whose
// caBundle the planner keeps, and the chart grants the shipped rules of
// config/rbac/pod_webhook_role.yaml.
func checkPodWebhook(t *testing.T, objs []map[string]any, args string, cfg map[string]any) {
	t.Helper()
	wc := find(objs, "MutatingWebhookConfiguration", "-pods")
	if wc == nil {
		t.Fatal("no MutatingWebhookConfiguration")
	}
	if name := path(wc, "metadata", "name"); path(cfg, "progressEndpoint", "podWebhook", "configurationName") != name {
		t.Errorf("planner patches caBundle of %v, the configuration is %v", path(cfg, "progressEndpoint", "podWebhook", "configurationName"), name)
	}
	// podwebhook.Configuration's two webhooks: opted-in namespaces, and
	// opted-in jobs elsewhere (disjoint by the namespace label).
	hooks := path(wc, "webhooks").([]any)
	var names []string
	for _, h := range hooks {
		names = append(names, fmt.Sprint(h.(map[string]any)["name"]))
	}
	if strings.Join(names, ",") != "pods.progress-endpoint.planner.progress.io,jobpods.progress-endpoint.planner.progress.io" {
		t.Fatalf("webhooks %v", names)
	}
	byNS, byJob := hooks[0].(map[string]any), hooks[1].(map[string]any)
	if path(byNS, "namespaceSelector", "matchLabels", "planner.progress.io/progress-endpoint") != "enabled" ||
		fmt.Sprint(path(byJob, "namespaceSelector", "matchExpressions")) != "[map[key:planner.progress.io/progress-endpoint operator:NotIn values:[enabled]]]" ||
		path(byJob, "objectSelector", "matchLabels", "planner.progress.io/progress-endpoint") != "enabled" {
		t.Errorf("selectors: namespaces %v; jobs %v %v", byNS["namespaceSelector"], byJob["namespaceSelector"], byJob["objectSelector"])
	}
	svc := find(objs, "Service", "-progress")
	for _, h := range hooks {
		checkPodWebhookService(t, h.(map[string]any), svc, args)
	}
	b, err := os.ReadFile("../../config/rbac/pod_webhook_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, got := find(objects(t, string(b)), "ClusterRole", ""), find(objs, "ClusterRole", "-pod-webhook")
	if want == nil || got == nil || !reflect.DeepEqual(want["rules"], got["rules"]) {
		t.Errorf("the chart's pod webhook ClusterRole %v differs from the shipped %v", got, want)
	}
}

// checkPodWebhookService: hook reaches the planner's pod-webhook port
// through the endpoint's Service, fails open and has no side effects.
func checkPodWebhookService(t *testing.T, hook, svc map[string]any, args string) {
	t.Helper()
	port := fmt.Sprint(path(hook, "clientConfig", "service", "port"))
	if !strings.Contains(args, "--progress-endpoint-pod-webhook-port="+port+" ") && !strings.HasSuffix(args, "--progress-endpoint-pod-webhook-port="+port) {
		t.Errorf("webhook at Service port %s, args %q", port, args)
	}
	found := false
	for _, sp := range path(svc, "spec", "ports").([]any) {
		found = found || fmt.Sprint(sp.(map[string]any)["port"]) == port && sp.(map[string]any)["targetPort"] == "pod-webhook"
	}
	if !found {
		t.Errorf("the endpoint Service has no port %s to the pod-webhook container port", port)
	}
	if path(hook, "clientConfig", "service", "name") != path(svc, "metadata", "name") {
		t.Errorf("webhook service %v, endpoint Service %v", path(hook, "clientConfig", "service"), path(svc, "metadata", "name"))
	}
	if hook["failurePolicy"] != "Ignore" || hook["sideEffects"] != "None" || path(hook, "clientConfig", "service", "path") != "/mutate-v1-pod" {
		t.Errorf("webhook %v", hook)
	}
}

// printConfig runs `planner run --config FILE --print-config`: the planner's
// strict parsing and validation, and the effective config back.
func printConfig(t *testing.T, config string) map[string]any {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testbin.Planner(t), "run", "--config", file, "--print-config").CombinedOutput()
	if err != nil {
		t.Fatalf("planner refuses the chart's config: %v\n%s\nconfig:\n%s", err, out, config)
	}
	var m map[string]any
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkArgs runs the planner with the Deployment's arguments, the config
// file swapped for a local copy, and --print-config: every flag parses.
func checkArgs(t *testing.T, argv []string, config string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string(nil), argv...)
	for i, a := range args {
		if strings.HasPrefix(a, "--config=") {
			args[i] = "--config=" + file
		}
	}
	out, err := exec.Command(testbin.Planner(t), append(args, "--print-config")...).CombinedOutput()
	if err != nil {
		t.Errorf("planner %v: %v\n%s", args, err, out)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func containsRule(rules []any, rule any) bool {
	for _, r := range rules {
		if reflect.DeepEqual(r, rule) {
			return true
		}
	}
	return false
}

func readYAML(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, string(b))
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects", file, len(objs))
	}
	return objs[0]
}

// TestSchedulerCoschedulingPreset: the chart's Coscheduling preset renders
// the profile config/scheduler ships for ProgressAware + Coscheduling
// (plugins, their order and Coscheduling's args), so the two cannot drift.
func TestSchedulerCoschedulingPreset(t *testing.T) {
	vals := readValues(t, "../../charts/planner-scheduler/values-coscheduling.yaml")
	objs := objects(t, Render(t, chartDir("planner-scheduler"), "planner-scheduler", "kube-system", vals))
	cm := find(objs, "ConfigMap", "-config")
	if cm == nil {
		t.Fatal("no scheduler config ConfigMap")
	}
	var rendered map[string]any
	if err := yaml.Unmarshal([]byte(path(cm, "data", "scheduler-config.yaml").(string)), &rendered); err != nil {
		t.Fatal(err)
	}
	shipped := readYAML(t, "../../config/scheduler/scheduler-config-coscheduling.yaml")
	profile := func(c map[string]any) map[string]any { return c["profiles"].([]any)[0].(map[string]any) }
	if got, want := profile(rendered)["plugins"], profile(shipped)["plugins"]; !reflect.DeepEqual(got, want) {
		t.Errorf("plugins differ from config/scheduler:\n%v\n%v", got, want)
	}
	args := func(c map[string]any, name string) any {
		for _, pc := range profile(c)["pluginConfig"].([]any) {
			if m := pc.(map[string]any); m["name"] == name {
				return m["args"]
			}
		}
		return nil
	}
	for _, name := range []string{"ProgressAware", "Coscheduling"} {
		if got, want := args(rendered, name), args(shipped, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s args %v, config/scheduler has %v", name, got, want)
		}
	}
	role := find(objs, "ClusterRole", "-progressforecasts")
	b, err := os.ReadFile("../../config/scheduler/rbac-scheduler-plugins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shippedRole := find(objects(t, string(b)), "ClusterRole", "")
	for _, rule := range shippedRole["rules"].([]any) {
		if !containsRule(role["rules"].([]any), rule) {
			t.Errorf("the chart's ClusterRole lacks the shipped rule %v", rule)
		}
	}
}
