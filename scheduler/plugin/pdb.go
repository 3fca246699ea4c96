package plugin

import (
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// markPDBViolations sets pdbViolating on every group with a pod whose
// eviction, counted in the order the groups come in, would take a matching
// PodDisruptionBudget below zero allowed disruptions. Pods the budget
// already lists as disrupted are not counted again.
func markPDBViolations(groups []*group, pdbs []*policy.PodDisruptionBudget) {
	if len(pdbs) == 0 {
		return
	}
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !s.Empty() {
			selectors[i] = s
		}
	}
	for _, g := range groups {
		for _, pod := range g.pods {
			if len(pod.Labels) == 0 {
				continue
			}
			for i, pdb := range pdbs {
				if selectors[i] == nil || pdb.Namespace != pod.Namespace || !selectors[i].Matches(labels.Set(pod.Labels)) {
					continue
				}
				if _, done := pdb.Status.DisruptedPods[pod.Name]; done {
					continue
				}
				if allowed[i]--; allowed[i] < 0 {
					g.pdbViolating = true
				}
			}
		}
	}
}
