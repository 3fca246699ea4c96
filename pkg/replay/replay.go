// Package replay writes a recorded history into a TrainJob's
// status.trainerStatus the way the Kubeflow Trainer status server does: a
// demo and test tool (`planner replay`, the e2e suites). It lives outside
// the controller's package because it writes TrainJob status, which the
// controller's RBAC must never allow.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainerac "github.com/kubeflow/trainer/v2/pkg/client/applyconfiguration/trainer/v1alpha1"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/progress"
)

// Options configure Run.
type Options struct {
	// Speed divides the time between reports (2: twice as fast as
	// recorded); 0 writes them back to back.
	Speed float64
	// Clock paces the replay and stamps lastUpdatedTime; nil is the real
	// clock.
	Clock clock.Clock
	// OnReport, when set, is called after each report with its index and
	// the write's error (nil when written). Returning an error stops the
	// replay with it.
	OnReport func(i int, r progress.FileReport, err error) error
}

// ErrStopped wraps the error OnReport returned.
var ErrStopped = errors.New("replay stopped")

// Run writes reports into the TrainJob's status.trainerStatus the way
// the Trainer status server does: server-side apply on the status
// subresource with field manager "trainer-status" and forced ownership,
// progress and ETA as integers, lastUpdatedTime from the writer's clock.
// Reports are spaced as recorded (their t), divided by Speed. A report the
// API server refuses as invalid is passed to OnReport and skipped, like
// the status server answers it with 422 and the job carries on; a missing
// TrainJob, or any other error, stops the replay. It returns the number
// of reports written.
func Run(ctx context.Context, c client.Client, key types.NamespacedName, reports []progress.FileReport, opts Options) (int, error) {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if opts.Speed < 0 {
		return 0, fmt.Errorf("speed %g must not be negative", opts.Speed)
	}
	written := 0
	start := clk.Now()
	for i, r := range reports {
		if opts.Speed > 0 && i > 0 {
			offset := time.Duration((r.T - reports[0].T) / opts.Speed * float64(time.Second))
			if wait := start.Add(offset).Sub(clk.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return written, ctx.Err()
				case <-clk.After(wait):
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return written, err
		}
		ts := kueueext.FromForecastStatus(r.TrainerStatus, clk.Now())
		err := c.Status().Apply(ctx, trainJobStatusApply(key, &ts), client.ForceOwnership, client.FieldOwner(kueueext.StatusFieldManager))
		switch {
		case err == nil:
			written++
		case apierrors.IsNotFound(err):
			return written, fmt.Errorf("TrainJob %s: %w", key, err)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Refused like the status server would refuse it; go on.
		default:
			return written, fmt.Errorf("report %d (t=%gs): %w", i, r.T, err)
		}
		if opts.OnReport != nil {
			if cbErr := opts.OnReport(i, r, err); cbErr != nil {
				return written, fmt.Errorf("%w: %w", ErrStopped, cbErr)
			}
		}
	}
	return written, nil
}

// trainJobStatusApply is the status server's apply configuration.
func trainJobStatusApply(key types.NamespacedName, ts *trainer.TrainerStatus) *trainerac.TrainJobApplyConfiguration {
	ac := trainerac.TrainerStatus()
	if ts.ProgressPercentage != nil {
		ac = ac.WithProgressPercentage(*ts.ProgressPercentage)
	}
	if ts.EstimatedRemainingSeconds != nil {
		ac = ac.WithEstimatedRemainingSeconds(*ts.EstimatedRemainingSeconds)
	}
	for _, m := range ts.Metrics {
		ac = ac.WithMetrics(trainerac.Metric().WithName(m.Name).WithValue(m.Value))
	}
	ac = ac.WithLastUpdatedTime(ts.LastUpdatedTime)
	return trainerac.TrainJob(key.Name, key.Namespace).WithStatus(trainerac.TrainJobStatus().WithTrainerStatus(ac))
}
