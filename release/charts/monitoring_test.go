package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// The chart's ServiceMonitor and PrometheusRule, and config/prometheus's,
// are prometheus-operator objects: each decodes strictly (no field the operator's v1 types do not
// have, every value of the type it expects) into those types, as pinned in
// release/go.mod; the rule groups are the shipped alerts file's; and the
// ServiceMonitor scrapes the metrics port over HTTPS with the scraper's
// token, as the secure metrics endpoint requires.
func TestMonitoringObjectsAreOperatorTypes(t *testing.T) {
	chart := Render(t, chartDir("progress-planner"), "progress-planner", "progress-planner-system", readValues(t, "testdata/values-monitoring.yaml"))
	var kustomize []string
	for _, f := range []string{"servicemonitor.yaml", "prometheusrule.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		kustomize = append(kustomize, string(b))
	}
	for name, manifest := range map[string]string{"chart": chart, "config/prometheus": strings.Join(kustomize, "\n---\n")} {
		t.Run(name, func(t *testing.T) { checkMonitoringObjects(t, objects(t, manifest)) })
	}
}

func checkMonitoringObjects(t *testing.T, objs []map[string]any) {
	decode := func(kind string, into any) {
		t.Helper()
		o := find(objs, kind, "")
		if o == nil {
			t.Fatalf("no %s in the monitoring render", kind)
		}
		if o["apiVersion"] != monitoringv1.SchemeGroupVersion.String() {
			t.Errorf("%s apiVersion %v, want %s", kind, o["apiVersion"], monitoringv1.SchemeGroupVersion)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s does not decode strictly into prometheus-operator's type: %v", kind, err)
		}
	}

	var sm monitoringv1.ServiceMonitor
	decode("ServiceMonitor", &sm)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Scheme == nil || !strings.EqualFold(string(*ep.Scheme), "https") || (ep.BearerTokenFile == "" && ep.Authorization == nil) {
		t.Errorf("ServiceMonitor endpoint %+v: want HTTPS with the scraper's token", ep)
	}

	var pr monitoringv1.PrometheusRule
	decode("PrometheusRule", &pr)
	b, err := os.ReadFile(filepath.Join("..", "..", "charts", "progress-planner", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &shipped); err != nil {
		t.Fatalf("alerts.yaml as a PrometheusRuleSpec: %v", err)
	}
	if len(pr.Spec.Groups) == 0 || !reflect.DeepEqual(pr.Spec, shipped) {
		t.Errorf("the PrometheusRule's groups are not alerts.yaml's (%d groups rendered, %d shipped)", len(pr.Spec.Groups), len(shipped.Groups))
	}
}
