// Package workloads decides which Kueue Workload belongs to which job, the one rule the controller, explain, the report and the e2e framework share.
//
// It is pure: functions over objects already read, no client calls. The
// caller lists (the controller from its cache, pre-filtered by Selector;
// explain from a snapshot of the namespace) and asks.
//
// The rule (For):
//
//  1. A Workload belongs to a job when its controller owner reference is the
//     job: the same UID. When the job's UID is unknown (the job is gone or
//     could not be read), the same API group, kind and name instead, and the
//     Match says so (ByName): a recreated job of the same name is then not
//     told apart from its predecessor.
//  2. Workloads being deleted (deletionTimestamp set) are ignored.
//  3. Of the rest, the single unfinished one wins. With none unfinished, the
//     newest finished one (creation time, then name). With several
//     unfinished ones (Kueue replaces a Workload briefly) there is no
//     match: the Match is Ambiguous and names them, and the caller waits
//     (the controller) or says so (explain).
//
// Kueue's job-uid label is not part of the rule: Kueue sets it on every
// Workload it creates for a job, so Selector is only a pre-filter for
// listing, and JobOf uses it only when a Workload has no controller.
package workloads

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// LabelJobUID is the label Kueue puts on a job's Workload: the job's UID.
const LabelJobUID = "kueue.x-k8s.io/job-uid"

// Ref names a job. UID may be empty (unknown); APIVersion's version is not
// compared, only its group.
type Ref struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// RefTo names obj, a job of the given kind.
func RefTo(gvk schema.GroupVersionKind, obj metav1.Object) Ref {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return Ref{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// ControllerOf is the job that controls obj (its controller owner
// reference, in obj's namespace); ok is false when it has none.
func ControllerOf(obj metav1.Object) (job Ref, ok bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return Ref{}, false
	}
	return Ref{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: obj.GetNamespace(), Name: ref.Name, UID: ref.UID}, true
}

// String is "Kind namespace/name" (and the UID when known).
func (r Ref) String() string {
	s := r.Kind + " " + r.Namespace + "/" + r.Name
	if r.Kind == "" {
		s = "job " + r.Namespace + "/" + r.Name
	}
	if r.UID != "" {
		s += " (uid " + string(r.UID) + ")"
	}
	return s
}

// Group is the API group of APIVersion ("" for the core group).
func (r Ref) Group() string {
	if g, _, ok := strings.Cut(r.APIVersion, "/"); ok {
		return g
	}
	return ""
}

// IsKind reports whether r is of the given API group and kind.
func (r Ref) IsKind(group, kind string) bool { return r.Kind == kind && r.Group() == group }

// Same reports whether a and b name the same job: the same UID when both
// are known, else the same namespace, group, kind and name.
func Same(a, b Ref) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.Namespace == b.Namespace && a.Name == b.Name && a.IsKind(b.Group(), b.Kind)
}

// Selector is the label selector that lists a job's Workloads (a
// pre-filter: For decides). Nil when the UID is unknown.
func Selector(job Ref) map[string]string {
	if job.UID == "" {
		return nil
	}
	return map[string]string{LabelJobUID: string(job.UID)}
}

// Match is For's answer.
type Match struct {
	// Workload is the job's Workload, nil when there is none or it is
	// ambiguous.
	Workload *kueue.Workload
	// ByName: the job's UID was unknown and Workloads were matched by their
	// controller's group, kind and name.
	ByName bool
	// Ambiguous: several unfinished Workloads belong to the job; Unfinished
	// names them, sorted.
	Ambiguous  bool
	Unfinished []string
	// Reason says why Workload is nil, or how it was chosen.
	Reason string
}

// For returns the Workload of job among wls (other namespaces and owners
// are skipped), by the package's rule.
func For(job Ref, wls []kueue.Workload) Match {
	m := Match{ByName: job.UID == ""}
	var unfinished, finished []*kueue.Workload
	deleting := 0
	for i := range wls {
		wl := &wls[i]
		if wl.Namespace != job.Namespace || !controlledBy(wl, job) {
			continue
		}
		switch {
		case wl.DeletionTimestamp != nil:
			deleting++
		case apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished):
			finished = append(finished, wl)
		default:
			unfinished = append(unfinished, wl)
		}
	}
	how := "controlled by " + job.String()
	if m.ByName {
		how += " (matched by kind and name: the job's UID is unknown)"
	}
	switch {
	case len(unfinished) == 1:
		m.Workload, m.Unfinished = unfinished[0], []string{unfinished[0].Name}
		m.Reason = "the unfinished Workload " + how
	case len(unfinished) > 1:
		for _, wl := range unfinished {
			m.Unfinished = append(m.Unfinished, wl.Name)
		}
		slices.Sort(m.Unfinished)
		m.Ambiguous = true
		m.Reason = fmt.Sprintf("%d unfinished Workloads are %s (%s): ambiguous until Kueue settles",
			len(unfinished), how, strings.Join(m.Unfinished, ", "))
	case len(finished) > 0:
		m.Workload = slices.MaxFunc(finished, func(a, b *kueue.Workload) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return cmp.Compare(a.Name, b.Name)
		})
		m.Reason = "the newest finished Workload " + how
	default:
		m.Reason = "no Workload is " + how
		if deleting > 0 {
			m.Reason += fmt.Sprintf(" other than %d being deleted", deleting)
		}
	}
	return m
}

// controlledBy reports whether wl's controller owner reference is job: the
// UID when known, else group, kind and name.
func controlledBy(wl *kueue.Workload, job Ref) bool {
	owner, ok := ControllerOf(wl)
	switch {
	case !ok:
		return false
	case job.UID != "":
		return owner.UID == job.UID
	}
	return Same(owner, job)
}

// JobOf is the job a Workload belongs to: its controller owner reference,
// else (ok, but with only the UID and namespace) Kueue's job-uid label.
// ok is false when it has neither.
func JobOf(wl *kueue.Workload) (job Ref, ok bool) {
	if job, ok := ControllerOf(wl); ok {
		return job, true
	}
	if uid := wl.Labels[LabelJobUID]; uid != "" {
		return Ref{Namespace: wl.Namespace, UID: types.UID(uid)}, true
	}
	return Ref{}, false
}
