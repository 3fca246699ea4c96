//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/test/framework"
)

// TestSweepJobAccepted: the ConfigMap and Indexed Job that `planner
// simulate --sweep … --as-job` writes are accepted by the real API server,
// first as a server-side dry run, then created and read back unchanged
// where it matters (one completion index per point × seed, Indexed mode,
// the ConfigMap mounted, the unit command).
func TestSweepJobAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	const ns = "sweep-e2e"
	out, err := exec.CommandContext(ctx, bin, "simulate", "--sweep", "gpus=24:40:8", "--sweep", "arrival-rate=1,1.5", "--seeds", "3",
		"--set", "deactivate.research=true", "--as-job", "--job-name", "capacity", "--job-namespace", ns, "--job-queue", "sweeps", "--parallelism", "4", "--image", "planner:e2e").Output()
	if err != nil {
		t.Fatalf("planner simulate --as-job: %v", err)
	}
	docs := strings.Split(string(out), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("want a ConfigMap and a Job, got %d documents:\n%s", len(docs), out)
	}
	var cm corev1.ConfigMap
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cm); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &job); err != nil {
		t.Fatal(err)
	}

	env := framework.Start(t)
	if err := env.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{cm.DeepCopy(), job.DeepCopy()} {
		if err := env.Client.Create(ctx, o, client.DryRunAll); err != nil {
			t.Fatalf("dry-run create %T: %v", o, err)
		}
	}
	for _, o := range []client.Object{&cm, &job} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	var got batchv1.Job
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capacity"}, &got); err != nil {
		t.Fatal(err)
	}
	units := int32(3 * 2 * 3) // gpus 24, 32, 40 × arrival-rate 1, 1.5 × 3 seeds
	spec := got.Spec
	c := spec.Template.Spec.Containers[0]
	if *spec.Completions != units || *spec.Parallelism != 4 || *spec.CompletionMode != batchv1.IndexedCompletion ||
		spec.Template.Spec.Volumes[0].ConfigMap.Name != "capacity" || strings.Join(c.Args, " ") != "simulate unit --config /etc/planner-sweep" ||
		got.Labels["kueue.x-k8s.io/queue-name"] != "sweeps" || c.Image != "planner:e2e" {
		t.Errorf("stored Job: completions %d parallelism %d mode %s args %q image %q labels %v", *spec.Completions, *spec.Parallelism, *spec.CompletionMode, c.Args, c.Image, got.Labels)
	}
	var gotCM corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capacity"}, &gotCM); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gotCM.Data["sweep.json"], `"knob": "deactivate.research"`) || !strings.Contains(gotCM.Data["scenario.yaml"], "name: built-in") {
		t.Errorf("stored ConfigMap: %v", gotCM.Data)
	}
	t.Logf("Indexed Job %s/%s accepted: %d completions, parallelism %d", ns, got.Name, *spec.Completions, *spec.Parallelism)
}
