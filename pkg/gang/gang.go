// Package gang says which gang a pod belongs to: the pods that must run,
// and therefore be evicted, together. It is the one place the gang key
// comes from: the planner-scheduler's ProgressAware plugin (scheduler/)
// groups preemption victims with it, and the per-kind job adapters are to
// use it too, so that a job is one gang for every part of the planner.
//
// The key is read from an ordered table of named rules (Rules); the first
// rule that matches a pod decides. A rule sees only the pod's metadata
// (labels, annotations, owner references; today's two rules read labels)
// and, for the minimum a gang runs with when that lives in another object
// (a PodGroup's spec.minMember), asks a Lookup. A job kind whose pods are
// recognised differently gets a rule of its own in the table, in the place
// its precedence calls for. The package imports only k8s.io/apimachinery
// so that both the product's module and the scheduler's can use it.
package gang

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the rules read. They are the projects' own constants, restated so
// that this package does not import those projects.
const (
	// PodGroupLabel names a pod's sigs.k8s.io/scheduler-plugins PodGroup
	// (scheduling.x-k8s.io/v1alpha1, v1alpha1.PodGroupLabel). Kubeflow
	// Trainer's coscheduling plugin names the PodGroup after the TrainJob.
	PodGroupLabel = "scheduling.x-k8s.io/pod-group"
	// JobSetNameLabel names a pod's JobSet (jobset.sigs.k8s.io's
	// JobSetNameKey). Kubeflow Trainer creates one JobSet per TrainJob,
	// named after it.
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"
	// JobNameLabel names a pod's batch/v1 Job (k8s.io/api batchv1's
	// JobNameLabel, set by the Job controller on every pod it creates).
	JobNameLabel = "batch.kubernetes.io/job-name"
	// KubeflowJobNameLabel names a pod's Kubeflow Training Operator job
	// (the kubeflow.org/v1 kinds and the MPI Operator's MPIJob; the
	// operators' JobNameLabel, set on every pod they create).
	KubeflowJobNameLabel = "training.kubeflow.org/job-name"
)

// Kind is what declares a gang.
type Kind string

const (
	KindPodGroup Kind = "PodGroup"
	KindJobSet   Kind = "JobSet"
	KindJob      Kind = "Job"
	// KindKubeflowJob: a Kubeflow Training Operator job (PyTorchJob,
	// TFJob, MPIJob, …).
	KindKubeflowJob Kind = "KubeflowJob"
)

// Gang is a pod's gang.
type Gang struct {
	// Kind and Namespace/Name identify the object that declares the gang;
	// pods with the same Key are one gang.
	Kind            Kind
	Namespace, Name string
	// Job is the job the gang runs (a TrainJob, JobSet, PyTorchJob or
	// batch/v1 Job),
	// which is also the name of its ProgressForecast: the JobSet's name when
	// the pod carries one (Trainer names the JobSet after the TrainJob),
	// else the PodGroup's (Trainer's coscheduling names the PodGroup after
	// the TrainJob), else the batch/v1 Job's.
	Job string
	// MinMember is the fewest running pods the gang works with (a PodGroup's
	// spec.minMember). 0 means every pod: the gang has no quorum below its
	// full size, or none is known.
	MinMember int32
	// Rule names the rule that matched (for logs and explanations).
	Rule string
}

// Key is the gang's identity, namespace/Kind/name.
func (g Gang) Key() string { return g.Namespace + "/" + string(g.Kind) + "/" + g.Name }

// Declared reports whether the gang's pods declare a quorum the
// scheduler enforces when placing them (a PodGroup, which Coscheduling
// places all-or-nothing), as opposed to a gang inferred from the job the
// pods belong to.
func (g Gang) Declared() bool { return g.Kind == KindPodGroup }

// Lookup finds the minimum member count of a PodGroup; ok is false when
// the PodGroup is unknown (not created yet, not watched, the CRD not
// installed). A nil Lookup knows none.
type Lookup interface {
	PodGroupMinMember(namespace, name string) (minMember int32, ok bool)
}

// Rule is one named way of recognising a gang.
type Rule struct {
	Name  string
	Match func(pod metav1.Object, l Lookup) (Gang, bool)
}

// Rules apply in order; the first that matches decides. A PodGroup comes
// before the JobSet label because it is what the scheduler places as a unit
// and it states the gang's quorum; a TrainJob run with Trainer's
// coscheduling carries both, naming the same TrainJob (and a PyTorchJob
// run with the operator's gang scheduling carries its PodGroup and its
// job-name label). The batch/v1 Job label comes last: a JobSet's pods carry
// it too (one Job per replicated job), and there the JobSet is the gang.
var Rules = [...]Rule{
	{"podGroup", podGroup},
	{"jobSet", jobSet},
	{"kubeflowJob", kubeflowJob},
	{"job", batchJob},
}

// Of returns the gang of pod (whose metadata is all that is read) and
// whether it has one; l may be nil.
func Of(pod metav1.Object, l Lookup) (Gang, bool) {
	for _, r := range Rules {
		if g, ok := r.Match(pod, l); ok {
			g.Rule = r.Name
			return g, true
		}
	}
	return Gang{}, false
}

// podGroup: the scheduler-plugins PodGroup label; the quorum is the
// PodGroup's minMember.
func podGroup(pod metav1.Object, l Lookup) (Gang, bool) {
	name := pod.GetLabels()[PodGroupLabel]
	if name == "" {
		return Gang{}, false
	}
	g := Gang{Kind: KindPodGroup, Namespace: pod.GetNamespace(), Name: name, Job: name}
	if js := pod.GetLabels()[JobSetNameLabel]; js != "" {
		g.Job = js
	}
	if l != nil {
		if mm, ok := l.PodGroupMinMember(g.Namespace, name); ok && mm > 0 {
			g.MinMember = mm
		}
	}
	return g, true
}

// jobSet: the JobSet label (a TrainJob's pods, through the JobSet Trainer
// creates for it). A JobSet has no quorum: all of its pods.
func jobSet(pod metav1.Object, _ Lookup) (Gang, bool) {
	name := pod.GetLabels()[JobSetNameLabel]
	if name == "" {
		return Gang{}, false
	}
	return Gang{Kind: KindJobSet, Namespace: pod.GetNamespace(), Name: name, Job: name}, true
}

// kubeflowJob: the Training Operator's job-name label (a PyTorchJob's
// pods). Its replicas are one gang: all of its pods.
func kubeflowJob(pod metav1.Object, _ Lookup) (Gang, bool) {
	name := pod.GetLabels()[KubeflowJobNameLabel]
	if name == "" {
		return Gang{}, false
	}
	return Gang{Kind: KindKubeflowJob, Namespace: pod.GetNamespace(), Name: name, Job: name}, true
}

// batchJob: the batch/v1 Job label (a Job's pods, the Job not part of a
// JobSet). A Job has no quorum: all of its pods.
func batchJob(pod metav1.Object, _ Lookup) (Gang, bool) {
	name := pod.GetLabels()[JobNameLabel]
	if name == "" {
		return Gang{}, false
	}
	return Gang{Kind: KindJob, Namespace: pod.GetNamespace(), Name: name, Job: name}, true
}

// MemberLabels are labels every pod of the gang carries (a selector for its
// candidate members); a pod they select belongs to the gang only if Of
// returns the same Key for it (a JobSet's pod that also names a PodGroup is
// that PodGroup's).
func (g Gang) MemberLabels() map[string]string {
	switch g.Kind {
	case KindPodGroup:
		return map[string]string{PodGroupLabel: g.Name}
	case KindJobSet:
		return map[string]string{JobSetNameLabel: g.Name}
	case KindJob:
		return map[string]string{JobNameLabel: g.Name}
	case KindKubeflowJob:
		return map[string]string{KubeflowJobNameLabel: g.Name}
	}
	return nil
}
