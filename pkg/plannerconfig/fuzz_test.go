package plannerconfig

import (
	"os"
	"reflect"
	"testing"
)

// FuzzParseConfig: the controller's config file. What parses is valid and
// round-trips through YAML(); nothing panics.
func FuzzParseConfig(f *testing.F) {
	for _, path := range []string{"../../config/manager/planner-config.yaml", "../../config/samples/planner-config.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	head := "apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\n"
	f.Add([]byte(head + "---\npolicy: {mode: enforce}\n"))
	f.Add([]byte(head + "policy: {evidence: {confidenceFloor: .nan}}\n"))
	f.Add([]byte(head + "forecast: {minInterval: 1e308s}\nworkloads: {maxNudges: 99999999999999999999}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config is invalid: %v", err)
		}
		out, err := c.YAML()
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		c2, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("rendered config does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}
