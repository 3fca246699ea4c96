package v1alpha1

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestProgressForecastJSONRoundTrip(t *testing.T) {
	pf := &ProgressForecast{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "ProgressForecast"},
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec:       ProgressForecastSpec{JobRef: JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "job"}},
		Status: ProgressForecastStatus{
			Revision: 3, Verdict: "Plateaued", Boost: -100, AdvisedBoost: -100, Mode: "enforce",
			Rejections: map[string]int32{"unparsable": 2},
			Forecast:   &ForecastSummary{Progress: "45.2%", ETA: "2h10m", Integrity: []string{"x"}},
			Decision:   &runtime.RawExtension{Raw: []byte(`{"verdict":"Plateaued","boost":-100}`)},
			History:    &runtime.RawExtension{Raw: []byte(`{"v":1,"t":[1,2],"cols":{}}`)},
			Conditions: []metav1.Condition{{Type: ConditionEnforcing, Status: metav1.ConditionTrue, Reason: "Enforcing"}},
		},
	}
	b, err := json.Marshal(pf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"history":{"v":1`) || !strings.Contains(string(b), `"decision":{"verdict"`) {
		t.Errorf("raw fields not embedded as JSON objects: %s", b)
	}
	var back ProgressForecast
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(pf.Status.Forecast, back.Status.Forecast) || back.Status.Boost != -100 ||
		string(back.Status.History.Raw) != string(pf.Status.History.Raw) {
		t.Errorf("round trip: %+v", back.Status)
	}
	cp := pf.DeepCopy()
	cp.Status.History.Raw[0] = 'X'
	cp.Status.Rejections["unparsable"] = 9
	if pf.Status.History.Raw[0] == 'X' || pf.Status.Rejections["unparsable"] == 9 {
		t.Error("DeepCopy shares memory")
	}
}

// The generated CRD carries the printer columns and the schemaless history
// and decision (config/crd/bases, make manifests).
func TestGeneratedCRD(t *testing.T) {
	b, err := os.ReadFile("../../config/crd/bases/planner.progress.io_progressforecasts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Names struct {
				ShortNames []string `json:"shortNames"`
			} `json:"names"`
			Scope    string `json:"scope"`
			Versions []struct {
				Name    string `json:"name"`
				Columns []struct {
					Name     string `json:"name"`
					JSONPath string `json:"jsonPath"`
					Priority int    `json:"priority"`
				} `json:"additionalPrinterColumns"`
				Subresources map[string]any `json:"subresources"`
				Schema       struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]map[string]any `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Scope != "Namespaced" || len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != "pf" {
		t.Errorf("scope %q short names %v", crd.Spec.Scope, crd.Spec.Names.ShortNames)
	}
	v := crd.Spec.Versions[0]
	var cols []string
	for _, c := range v.Columns {
		cols = append(cols, c.Name)
	}
	if got := strings.Join(cols[:9], ","); got != "Kind,Job,Progress,ETA,Verdict,Boost,Metric,Predicted,Age" || v.Columns[1].Priority != 1 {
		t.Errorf("printer columns %v", cols)
	}
	if _, ok := v.Subresources["status"]; !ok {
		t.Error("no status subresource")
	}
	status := v.Schema.OpenAPIV3Schema.Properties["status"].Properties
	for _, f := range []string{"history", "decision"} {
		if status[f]["x-kubernetes-preserve-unknown-fields"] != true {
			t.Errorf("status.%s: %v", f, status[f])
		}
	}
}
