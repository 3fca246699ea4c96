package backtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestReadBoundedRefusesHugeFiles: the backtest holds whole files, so a
// file of more than MaxReports reports is refused as soon as it has that
// many, naming the line and the limit.
func TestReadBoundedRefusesHugeFiles(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"huge","derivedFrom":null}` + "\n")
	for i := range MaxReports + 1 {
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{}}`+"\n", i)
	}
	_, err := readBounded(strings.NewReader(b.String()))
	want := fmt.Sprintf("line %d: more than %d reports", MaxReports+2, MaxReports)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	hf, err := readBounded(strings.NewReader(b.String()[:strings.LastIndex(strings.TrimSuffix(b.String(), "\n"), "\n")+1]))
	if err != nil {
		t.Fatalf("a file of exactly MaxReports: %v", err)
	}
	if len(hf.Reports) != MaxReports {
		t.Errorf("a file of exactly MaxReports: %d reports", len(hf.Reports))
	}
}
