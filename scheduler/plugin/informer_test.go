package plugin

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
)

// TestInformerTransform stores ProgressForecasts the way the informer does
// (unstructured, through the transform) and reads them back through Get.
func TestInformerTransform(t *testing.T) {
	raw, err := json.Marshal(preempt.Decision{At: float64(now.Unix()), Verdict: preempt.Plateaued, Mode: preempt.ModeEnforce, Boost: -100})
	if err != nil {
		t.Fatal(err)
	}
	toUnstructured := func(name string, decision []byte) *unstructured.Unstructured {
		pf := &v1alpha1.ProgressForecast{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ProgressForecast"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: name}},
		}
		if decision != nil {
			pf.Status.Decision = &runtime.RawExtension{Raw: decision}
			pf.Status.Verdict, pf.Status.Mode, pf.Status.AdvisedBoost = string(preempt.Plateaued), string(preempt.ModeEnforce), -100
			pf.Status.SetDecision(float64(now.Unix()), float64(now.Unix()), nil, nil)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pf)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, u := range []*unstructured.Unstructured{toUnstructured("plat", raw), toUnstructured("fresh", nil)} {
		obj, err := transformForecast(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	f := &informerForecasts{indexer: store}
	got := f.Get(ns, "plat")
	if got == nil || got.Verdict != preempt.Plateaued || got.Boost != -100 || !got.Stalled(now.Add(time.Minute), time.Hour) {
		t.Errorf("plat: %+v", got)
	}
	if got := f.Get(ns, "fresh"); got != nil {
		t.Errorf("a ProgressForecast without a decision should be untracked, got %+v", got)
	}
	if got := f.Get(ns, "missing"); got != nil {
		t.Errorf("missing: %+v", got)
	}
}
