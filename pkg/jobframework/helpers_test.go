package jobframework

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// latest is a's report of obj, failing the test when there is none.
func latest(t *testing.T, obj client.Object) Report {
	t.Helper()
	r, ok := (TrainJob{}).Latest(obj)
	if !ok {
		t.Fatal("no report")
	}
	return r
}
