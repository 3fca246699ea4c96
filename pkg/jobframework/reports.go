package jobframework

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

// ReportSource holds the latest progress report of jobs that carry none in
// their own object (batch/v1 Jobs, JobSets). The planner's progress
// endpoint writes into one; the controller of each kind reads Latest when
// it reconciles a job and is woken by Events.
type ReportSource interface {
	// Latest is job's latest report; ok is false when there is none. A
	// report stored for another job of the same name (another UID) is
	// not job's.
	Latest(job workloads.Ref) (r Report, ok bool)
	// Events delivers one generic event per new report for a job of the
	// given group and kind (for controller-runtime's source.Channel). The
	// event's object carries only the job's namespace and name.
	Events(gk schema.GroupKind) <-chan event.GenericEvent
	// Forget drops job's report: the job is gone.
	Forget(job workloads.Ref)
}

// eventBuffer is each kind's channel buffer. A full buffer does not block
// Put nor drop the event: the send continues in the background.
const eventBuffer = 256

// MemorySource is a thread-safe in-memory ReportSource: the latest report
// per job, lost on restart (the job's ProgressForecast keeps its history).
type MemorySource struct {
	mu     sync.Mutex
	latest map[sourceKey]stored
	events map[schema.GroupKind]chan event.GenericEvent
}

type sourceKey struct {
	gk              schema.GroupKind
	namespace, name string
}

type stored struct {
	ref    workloads.Ref
	report Report
}

// NewMemorySource returns an empty MemorySource.
func NewMemorySource() *MemorySource {
	return &MemorySource{latest: map[sourceKey]stored{}, events: map[schema.GroupKind]chan event.GenericEvent{}}
}

func keyOf(job workloads.Ref) sourceKey {
	return sourceKey{gk: schema.GroupKind{Group: job.Group(), Kind: job.Kind}, namespace: job.Namespace, name: job.Name}
}

// Put stores s as job's latest report, received at receivedAt (the
// planner's clock), and notifies job's kind. It replaces the report of a
// job of the same name with another UID (the job was recreated).
func (m *MemorySource) Put(job workloads.Ref, s progress.TrainerStatus, receivedAt time.Time) {
	k := keyOf(job)
	r := Report{Status: s, Hash: hashJSON(s), ReceivedAt: receivedAt}
	m.mu.Lock()
	m.latest[k] = stored{ref: job, report: r}
	ch := m.channel(k.gk)
	m.mu.Unlock()
	ev := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}}
	select {
	case ch <- ev:
	default:
		go func() { ch <- ev }()
	}
}

// Forget implements ReportSource.
func (m *MemorySource) Forget(job workloads.Ref) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.latest[keyOf(job)]; ok && workloads.Same(s.ref, job) {
		delete(m.latest, keyOf(job))
	}
}

// Latest implements ReportSource.
func (m *MemorySource) Latest(job workloads.Ref) (Report, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.latest[keyOf(job)]
	if !ok || !workloads.Same(s.ref, job) {
		return Report{}, false
	}
	return s.report, true
}

// Events implements ReportSource.
func (m *MemorySource) Events(gk schema.GroupKind) <-chan event.GenericEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.channel(gk)
}

func (m *MemorySource) channel(gk schema.GroupKind) chan event.GenericEvent {
	ch, ok := m.events[gk]
	if !ok {
		ch = make(chan event.GenericEvent, eventBuffer)
		m.events[gk] = ch
	}
	return ch
}
