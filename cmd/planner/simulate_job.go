package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/simulator"
)

// jobFlags: --sweep … --as-job writes a Kubernetes Indexed Job instead of
// running the sweep (docs/simulator.md, "A sweep as a Kubernetes Job").
type jobFlags struct {
	asJob                     bool
	name, namespace, image    string
	queue, dataPVC, resultPVC string
	parallelism               int
}

const (
	sweepConfigDir = "/etc/planner-sweep"
	sweepDataDir   = "/data"
	sweepResultDir = "/results"
	// maxConfigMapBytes: the API server refuses a ConfigMap over 1 MiB.
	maxConfigMapBytes = 1 << 20
)

func (f *jobFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.asJob, "as-job", false, "with --sweep: write a Kubernetes Indexed Job (one completion index per point × seed) and its ConfigMap instead of running; merge the pods' results with 'planner simulate collect'")
	fl.StringVar(&f.name, "job-name", "planner-sweep", "with --as-job: the Job's and ConfigMap's name")
	fl.StringVar(&f.namespace, "job-namespace", "default", "with --as-job: their namespace")
	fl.StringVar(&f.image, "image", "", "with --as-job: the planner image the pods run (default: "+imageRepository+":<this build's release version>; a development build must name one)")
	fl.StringVar(&f.queue, "job-queue", "", "with --as-job: the Kueue LocalQueue the Job is submitted to (label kueue.x-k8s.io/queue-name)")
	fl.StringVar(&f.dataPVC, "data-pvc", "", "with --as-job: a PersistentVolumeClaim mounted read-only at /data holding the scenario's trace and curves (by base name); needed when the scenario reads files")
	fl.StringVar(&f.resultPVC, "results-pvc", "", "with --as-job: a PersistentVolumeClaim mounted at /results where each pod also writes unit-N.json (the pods always print their result to their log)")
	fl.IntVar(&f.parallelism, "parallelism", 0, "with --as-job: pods at a time (default: every unit)")
}

// imageRepository is where `make release` publishes the planner's image
// (the Makefile's REGISTRY).
const imageRepository = "ghcr.io/progress-planner/planner"

// releasedImage is the image a release build of version v runs in, or ""
// for a development build: pods must run the same
// simulator as the binary that wrote their Job, never a floating tag.
func releasedImage(v string) string {
	if !releaseVersion.MatchString(v) {
		return ""
	}
	return imageRepository + ":" + v
}

// releaseVersion is a tag `make release` publishes: vX.Y.Z, optionally
// -alpha/-beta/-rc.N; `git describe` suffixes (-4-gabcdef0, -dirty) are not.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)(\.[0-9]+)?)?$`)

// sweepJobManifests builds the ConfigMap (scenario.yaml, sweep.json) and
// the Indexed Job of a sweep.
func sweepJobManifests(sc *simulator.Scenario, opt simulator.Options, sp simulator.SweepSpec, f jobFlags) (*corev1.ConfigMap, *batchv1.Job, error) {
	ship := *sc
	if ship.Trace != nil || (ship.Curves != nil && ship.Curves.Dir != "") {
		if f.dataPVC == "" {
			return nil, nil, usageErrorf("--as-job: the scenario reads files (trace, curves): put them in a volume and give its claim with --data-pvc")
		}
		if ship.Trace != nil {
			tr := *ship.Trace
			tr.Path = path.Join(sweepDataDir, filepath.Base(tr.Path))
			ship.Trace = &tr
		}
		if ship.Curves != nil && ship.Curves.Dir != "" {
			ship.Curves = &simulator.CurveSource{Dir: path.Join(sweepDataDir, filepath.Base(filepath.Clean(ship.Curves.Dir)))}
		}
	}
	scYAML, err := yaml.Marshal(&ship)
	if err != nil {
		return nil, nil, fmt.Errorf("scenario: %w", err)
	}
	cfgJSON, err := json.MarshalIndent(simulator.SweepConfig{Spec: sp, Options: simulator.PortableOptions{Options: opt}}, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("sweep config: %w", err)
	}
	if n := len(scYAML) + len(cfgJSON); n > maxConfigMapBytes-4096 {
		return nil, nil, fmt.Errorf("--as-job: the scenario and sweep take %d bytes, more than a ConfigMap holds (1 MiB): use a trace file on --data-pvc instead of a job list", n)
	}
	labels := map[string]string{"app.kubernetes.io/name": "planner-sweep", "app.kubernetes.io/instance": f.name}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: f.name, Namespace: f.namespace, Labels: labels},
		Data:       map[string]string{"scenario.yaml": string(scYAML), "sweep.json": string(cfgJSON)},
	}
	units := int32(sp.Units())
	par := units
	if f.parallelism > 0 && int32(f.parallelism) < units {
		par = int32(f.parallelism)
	}
	args := []string{"simulate", "unit", "--config", sweepConfigDir}
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: sweepConfigDir, ReadOnly: true}}
	vols := []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: f.name}}}}}
	if f.dataPVC != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "data", MountPath: sweepDataDir, ReadOnly: true})
		vols = append(vols, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: f.dataPVC, ReadOnly: true}}})
	}
	if f.resultPVC != "" {
		args = append(args, "--out-dir", sweepResultDir)
		mounts = append(mounts, corev1.VolumeMount{Name: "results", MountPath: sweepResultDir})
		vols = append(vols, corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: f.resultPVC}}})
	}
	jobLabels := map[string]string{}
	for k, v := range labels {
		jobLabels[k] = v
	}
	if f.queue != "" {
		jobLabels["kueue.x-k8s.io/queue-name"] = f.queue
	}
	// One core and the simulator's 2 GiB budget per pod (docs/simulator.md,
	// "Speed": the whole Philly trace stays under 1.75 GiB).
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: f.name, Namespace: f.namespace, Labels: jobLabels},
		Spec: batchv1.JobSpec{
			CompletionMode:       ptr.To(batchv1.IndexedCompletion),
			Completions:          &units,
			Parallelism:          &par,
			BackoffLimitPerIndex: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "simulate", Image: f.image, Args: args, VolumeMounts: mounts, Resources: res,
						Env: []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "1"}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
					Volumes: vols,
				},
			},
		},
	}
	return cm, job, nil
}

func writeSweepJob(cmd *cobra.Command, sc *simulator.Scenario, opt simulator.Options, sp simulator.SweepSpec, f jobFlags, outFile string) error {
	if f.image == "" {
		f.image = releasedImage(versionInfo().Version)
		if f.image == "" {
			return usageErrorf("--as-job: this development build (version %q) has no released image; pass --image", versionInfo().Version)
		}
	}
	cm, job, err := sweepJobManifests(sc, opt, sp, f)
	if err != nil {
		return err
	}
	return writeOutput(cmd, outFile, func(w io.Writer) error {
		for i, o := range []any{cm, job} {
			b, err := yaml.Marshal(o)
			if err != nil {
				return err
			}
			if i > 0 {
				io.WriteString(w, "---\n")
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// newSimulateUnitCmd: one pod's work in a sweep Job.
func newSimulateUnitCmd() *cobra.Command {
	var dir, outDir string
	var index int
	cmd := &cobra.Command{
		Use:   "unit",
		Short: "Run one unit (point × seed) of a sweep Job: the index is --index or $JOB_COMPLETION_INDEX",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGCForBatch()
			if !cmd.Flags().Changed("index") {
				v := os.Getenv("JOB_COMPLETION_INDEX")
				n, err := strconv.Atoi(v)
				if err != nil {
					return usageErrorf("no --index and JOB_COMPLETION_INDEX %q is not an index", v)
				}
				index = n
			}
			sc, err := simulator.LoadScenario(filepath.Join(dir, "scenario.yaml"))
			if err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
			if err != nil {
				return err
			}
			var cfg simulator.SweepConfig
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, "sweep.json"), err)
			}
			res, err := cfg.RunUnit(sc, index)
			if err != nil {
				return err
			}
			out, err := json.Marshal(res)
			if err != nil {
				return err
			}
			out = append(out, '\n')
			if outDir != "" {
				if err := os.WriteFile(filepath.Join(outDir, fmt.Sprintf("unit-%d.json", index)), out, 0o644); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "config", sweepConfigDir, "directory holding scenario.yaml and sweep.json (the Job's ConfigMap)")
	cmd.Flags().StringVar(&outDir, "out-dir", "", "also write the result to DIR/unit-INDEX.json")
	cmd.Flags().IntVar(&index, "index", 0, "the unit to run (default: $JOB_COMPLETION_INDEX)")
	return cmd
}

// newSimulateCollectCmd merges a sweep Job's unit results.
func newSimulateCollectCmd() *cobra.Command {
	var goal, outFile string
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "collect FILE|DIR...",
		Short: "Merge the unit results of a sweep Job (files of JSON lines, e.g. the pods' logs, or directories of unit-N.json) into the sweep's table, JSON or HTML",
		Example: `  kubectl logs -l app.kubernetes.io/instance=planner-sweep --tail=-1 > units.jsonl
  planner simulate collect units.jsonl --goal 'queueing.p95<=1h' -o html --out sweep.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var g *simulator.Goal
			if goal != "" {
				x, err := simulator.ParseGoal(goal)
				if err != nil {
					return usageErrorf("--goal: %v", err)
				}
				g = &x
			}
			results, err := readUnitResults(args)
			if err != nil {
				return err
			}
			sw, err := simulator.CollectSweep(results)
			if err != nil {
				return err
			}
			return writeSweep(cmd, sw, g, output.String(), outFile)
		},
	}
	cmd.Flags().StringVar(&goal, "goal", "", "answer the smallest setting of the first knob meeting METRIC<=VALUE (as simulate --goal)")
	output = addOutputFlag(cmd, formatTable, formatJSON, formatHTML)
	cmd.Flags().StringVar(&outFile, "out", "", "write the output to this file instead of standard output")
	return cmd
}

// readUnitResults reads every JSON value of the files (directories: their
// *.json files, in name order).
func readUnitResults(args []string) ([]simulator.UnitResult, error) {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	var out []simulator.UnitResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		for dec.More() {
			var r simulator.UnitResult
			if err := dec.Decode(&r); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
