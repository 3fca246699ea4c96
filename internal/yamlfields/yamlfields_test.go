package yamlfields

import (
	"reflect"
	"strings"
	"testing"
)

type leaf struct{ S string }

type inner struct {
	Enter float64 `json:"enterProbability"`
	Wait  leaf    `json:"wait"`
}

type Base struct {
	Name string `json:"name"`
}

type doc struct {
	Base   `json:",inline"`
	Inner  inner   `json:"plateau"`
	List   []inner `json:"overrides"`
	Ptr    *inner  `json:"ptr,omitempty"`
	Hidden string  `json:"-"`
}

func TestUnknown(t *testing.T) {
	got := Unknown([]byte(`
name: x
plateau: {enterprobability: 0.8, enterProb: 0.9, wait: {anything: 1}}
overrides: [{enterProbability: 1}, {stopp: true}]
ptr: {typo: 1}
Hidden: 2
`), reflect.TypeFor[doc](), reflect.TypeFor[leaf]())
	want := []string{
		`"Hidden" (known at this level: name, plateau, overrides, ptr)`,
		`"overrides[1].stopp" (known at this level: enterProbability, wait)`,
		`"plateau.enterProb" (known at this level: enterProbability, wait)`,
		`"ptr.typo" (known at this level: enterProbability, wait)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if Unknown([]byte("{not yaml"), reflect.TypeFor[doc]()) != nil {
		t.Error("malformed YAML should yield nil (the decoder reports it)")
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"one document", "a: 1\nb: [1.5, 2]\n", ""},
		{"leading separator", "---\na: 1\n", ""},
		{"second document", "a: 1\n---\nmode: enforce\n", "second YAML document at line 2"},
		{"nan", "policy:\n  evidence:\n    confidenceFloor: .nan\n", `policy.evidence.confidenceFloor (line 3): ".nan": not a finite number`},
		{"inf in a list", "xs: [1, -.inf]\n", `xs[1] (line 1): "-.inf"`},
		{"the string nan", "x: \".nan\"\n", ""},
		{"not yaml", "a: [\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
