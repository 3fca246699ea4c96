//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/test/framework"
)

// TestExplainRecreatedJob: a TrainJob is deleted and created again under the
// same name while its predecessor's Workload may still be there (this
// control plane runs no garbage collector: the old Workload keeps its owner
// reference to the old UID). The controller acts on the new job's Workload
// (its ProgressForecast records it), and `planner explain` names that same
// Workload, not the old one whose owner has the same name (pkg/workloads:
// both apply workloads.For).
func TestExplainRecreatedJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	env := plannerEnv(t)
	kc := writeKubeconfig(t, env.Config)
	c := startPlanner(ctx, t, env, testConfig())
	const ns = "exp-recreate"

	old, wlOld := runningJob(ctx, t, env, ns, "q-recreate", "job", "")
	waitPF(ctx, t, c, old, plannerBound, "the first job's Workload", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Workload == wlOld.Name
	})
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &kftrainer.TrainJob{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Fatalf("TrainJob %s/job not deleted: %v", ns, err)
	}

	tj, err := env.CreateTrainJob(ctx, ns, "job", "q-recreate", 8, "")
	if err != nil {
		t.Fatal(err)
	}
	wl, err := env.WaitForWorkload(ctx, tj, bound)
	if err != nil {
		t.Fatal(err)
	}
	pf := waitPF(ctx, t, c, tj, plannerBound, "the new job's forecast recording its Workload", func(pf *v1alpha1.ProgressForecast) bool {
		ref := metav1.GetControllerOf(pf)
		return ref != nil && ref.UID == tj.UID && pf.Status.Workload == wl.Name
	})
	var stale kueue.Workload
	switch err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlOld), &stale); {
	case err == nil:
		t.Logf("the old job's Workload %s is still there (deleting %v): the case where explain used to be able to pick it", stale.Name, stale.DeletionTimestamp != nil)
	case apierrors.IsNotFound(err):
		t.Logf("the old job's Workload %s is gone: only the new one to pick", wlOld.Name)
	default:
		t.Fatal(err)
	}

	var e report.Explanation
	out := runCLI(ctx, t, bin, "explain", ns+"/job", "--kubeconfig", kc, "-o", "json")
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	// explain names it namespace/name.
	if e.Workload != ns+"/"+pf.Status.Workload || pf.Status.Workload != wl.Name {
		t.Errorf("explain %s/job names Workload %q; the controller acts on %q (framework: %q)", ns, e.Workload, pf.Status.Workload, wl.Name)
	}
}
