// Package clusterview is the thin Kubernetes adapter of `planner report`,
// `planner explain` and the live page: it lists ProgressForecasts,
// Workloads, LocalQueues and ClusterQueues (read-only) into a Snapshot,
// and turns a Snapshot into the pure inputs of pkg/report.
package clusterview

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
)

// Snapshot is what was read from the cluster. Missing APIs leave their
// list empty and are named in Missing (a cluster without Kueue still has
// forecasts to show).
type Snapshot struct {
	Forecasts     []v1alpha1.ProgressForecast
	Workloads     []kueue.Workload
	LocalQueues   []kueue.LocalQueue
	ClusterQueues []kueue.ClusterQueue
	// Missing names the kinds that could not be listed and why (not
	// served, or forbidden).
	Missing []string
}

// Read lists everything the report and explain need, in namespace ns
// ("" for all namespaces; ClusterQueues are cluster-scoped).
func Read(ctx context.Context, c client.Reader, ns string) (*Snapshot, error) {
	return ReadWith(ctx, c, c, ns)
}

// ReadWith reads the namespaced kinds through c and the ClusterQueues
// through cq: the live page reads the controller's cache, which holds no
// ClusterQueues, and the API server for those.
func ReadWith(ctx context.Context, c, cq client.Reader, ns string) (*Snapshot, error) {
	s := &Snapshot{}
	opts := []client.ListOption{}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	var pfs v1alpha1.ProgressForecastList
	var wls kueue.WorkloadList
	var lqs kueue.LocalQueueList
	var cqs kueue.ClusterQueueList
	for _, l := range []struct {
		kind string
		list client.ObjectList
		ns   bool
	}{
		{"ProgressForecasts", &pfs, true},
		{"Workloads", &wls, true},
		{"LocalQueues", &lqs, true},
		{"ClusterQueues", &cqs, false},
	} {
		o, r := opts, c
		if !l.ns {
			o, r = nil, cq
		}
		if err := r.List(ctx, l.list, o...); err != nil {
			if tolerable(err) {
				s.Missing = append(s.Missing, fmt.Sprintf("%s: %v", l.kind, err))
				continue
			}
			return nil, fmt.Errorf("list %s: %w", l.kind, err)
		}
	}
	s.Forecasts, s.Workloads, s.LocalQueues, s.ClusterQueues = pfs.Items, wls.Items, lqs.Items, cqs.Items
	return s, nil
}

// tolerable: a kind that is not served (no Kueue, no CRD) or that the
// reader may not list leaves a hole in the report, not an error.
func tolerable(err error) bool {
	var nm *meta.NoKindMatchError
	return errors.As(err, &nm) || meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
}
