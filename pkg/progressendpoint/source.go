package progressendpoint

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

// ToSource is the Sink `planner run` uses: every accepted report becomes
// its job's latest report in src, the job framework's report source the
// controllers read (and are woken by).
func ToSource(src *jobframework.MemorySource) Sink { return sourceSink{src} }

type sourceSink struct{ src *jobframework.MemorySource }

func (s sourceSink) Accept(_ context.Context, job JobRef, status progress.TrainerStatus, receivedAt time.Time) error {
	s.src.Put(job.Ref(), status, receivedAt)
	return nil
}

// Ref names the job for pkg/workloads and the job framework.
func (j JobRef) Ref() workloads.Ref {
	return workloads.Ref{
		APIVersion: schema.GroupVersion{Group: j.Group, Version: j.Version}.String(),
		Kind:       j.Kind, Namespace: j.Namespace, Name: j.Name, UID: types.UID(j.UID),
	}
}
