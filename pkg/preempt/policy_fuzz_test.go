package preempt

import (
	"reflect"
	"testing"
)

// FuzzParsePolicy: the policy YAML (the config's policy section, the
// simulator's scenarios). What parses is valid and round-trips through
// YAML(); nothing panics.
func FuzzParsePolicy(f *testing.F) {
	def, err := DefaultPolicy().YAML()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	f.Add([]byte("mode: advise\n---\nmode: enforce\n"))
	f.Add([]byte("plateau: {enterProbability: .nan}\n"))
	f.Add([]byte("boosts: {min: -2000000000, max: 2000000000}\noverrides: [{namespace: a, mode: enforce}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePolicy(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed policy is invalid: %v", err)
		}
		out, err := p.YAML()
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		p2, err := ParsePolicy(out)
		if err != nil {
			t.Fatalf("rendered policy does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, p2)
		}
	})
}
