package gang

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type lookup map[string]int32

func (l lookup) PodGroupMinMember(ns, name string) (int32, bool) {
	mm, ok := l[ns+"/"+name]
	return mm, ok
}

func pod(labels map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "ml", Name: "p", Labels: labels}
}

func TestOf(t *testing.T) {
	groups := lookup{"ml/pg": 3, "ml/zero": 0}
	tests := []struct {
		name   string
		labels map[string]string
		l      Lookup
		want   Gang
		ok     bool
	}{
		{"no label: no gang", map[string]string{"app": "x"}, groups, Gang{}, false},
		{"jobSet", map[string]string{JobSetNameLabel: "js"}, groups,
			Gang{Kind: KindJobSet, Namespace: "ml", Name: "js", Job: "js", Rule: "jobSet"}, true},
		{"podGroup with its minMember", map[string]string{PodGroupLabel: "pg"}, groups,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "pg", Job: "pg", MinMember: 3, Rule: "podGroup"}, true},
		{"podGroup not known yet: every pod", map[string]string{PodGroupLabel: "other"}, groups,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "other", Job: "other", Rule: "podGroup"}, true},
		{"podGroup without a lookup", map[string]string{PodGroupLabel: "pg"}, nil,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "pg", Job: "pg", Rule: "podGroup"}, true},
		{"podGroup minMember 0 means every pod", map[string]string{PodGroupLabel: "zero"}, groups,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "zero", Job: "zero", Rule: "podGroup"}, true},
		{"batch Job", map[string]string{JobNameLabel: "j"}, groups,
			Gang{Kind: KindJob, Namespace: "ml", Name: "j", Job: "j", Rule: "job"}, true},
		{"PyTorchJob", map[string]string{KubeflowJobNameLabel: "pt", "training.kubeflow.org/replica-type": "worker"}, groups,
			Gang{Kind: KindKubeflowJob, Namespace: "ml", Name: "pt", Job: "pt", Rule: "kubeflowJob"}, true},
		{"PyTorchJob with gang scheduling: the PodGroup is the gang", map[string]string{KubeflowJobNameLabel: "pt", PodGroupLabel: "pt"}, groups,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "pt", Job: "pt", Rule: "podGroup"}, true},
		{"a JobSet's Job: the JobSet is the gang", map[string]string{JobNameLabel: "js-workers-0", JobSetNameLabel: "js"}, groups,
			Gang{Kind: KindJobSet, Namespace: "ml", Name: "js", Job: "js", Rule: "jobSet"}, true},
		{"TrainJob with coscheduling: the PodGroup is the gang, the JobSet names the job",
			map[string]string{PodGroupLabel: "pg", JobSetNameLabel: "tj"}, groups,
			Gang{Kind: KindPodGroup, Namespace: "ml", Name: "pg", Job: "tj", MinMember: 3, Rule: "podGroup"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Of(pod(tt.labels), tt.l)
			if ok != tt.ok || got != tt.want {
				t.Errorf("Of = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestKey(t *testing.T) {
	a, _ := Of(pod(map[string]string{PodGroupLabel: "x"}), nil)
	b, _ := Of(pod(map[string]string{JobSetNameLabel: "x"}), nil)
	if a.Key() == b.Key() {
		t.Errorf("a PodGroup and a JobSet of the same name share the key %q", a.Key())
	}
	if a.Key() != "ml/PodGroup/x" || !a.Declared() || b.Declared() {
		t.Errorf("keys %q %q, declared %v %v", a.Key(), b.Key(), a.Declared(), b.Declared())
	}
}
