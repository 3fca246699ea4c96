package backtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestReadBoundedRefusesHugeFiles: the backtest holds whole files, so a
// file of more than MaxFileBytes bytes or MaxReports reports is refused as
// soon as it has that much, naming the limit.
func TestReadBoundedRefusesHugeFiles(t *testing.T) {
	wide := `{"kind":"ProgressHistory","version":1,"name":"wide","derivedFrom":null}` + "\n" +
		strings.Repeat(`{"t":1,"trainerStatus":{"metrics":[{"name":"loss","value":"`+strings.Repeat("1", 512<<10)+`"}]}}`+"\n", 2*MaxFileBytes/(512<<10))
	want := fmt.Sprintf("more than %d MiB", MaxFileBytes>>20)
	if _, err := readBounded(strings.NewReader(wide)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a %d MiB file: error %v, want it to contain %q", len(wide)>>20, err, want)
	}

	var b strings.Builder
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"huge","derivedFrom":null}` + "\n")
	for i := range MaxReports + 1 {
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{}}`+"\n", i)
	}
	_, err := readBounded(strings.NewReader(b.String()))
	want = fmt.Sprintf("line %d: more than %d reports", MaxReports+2, MaxReports)
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
