package simulator

import (
	"errors"
	"strings"
	"testing"
)

const phillyCSV = `timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,2,5902.0,6214e9
2017-10-09 06:13:36,0,1,0,6214e9
2017-10-09 08:00:00,100,8,800,11cb48
`

func TestReadPhilly(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader(phillyCSV), FormatPhilly, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 3 || tr.Skipped["zero duration"] != 1 {
		t.Fatalf("jobs %+v skipped %v", tr.Jobs, tr.Skipped)
	}
	// Sorted by submission: line 3 (06:13:03) first, at arrival 0.
	first := tr.Jobs[0]
	if first.Line != 3 || first.Arrival != 0 || first.GPUs != 2 || first.Duration != 2951 || first.Group != "6214e9" {
		t.Errorf("first job %+v", first)
	}
	if j := tr.Jobs[1]; j.Line != 2 || j.Arrival != 48*60+52 {
		t.Errorf("second job %+v", j)
	}
	st := tr.Stats()
	if st.Jobs != 3 || st.MaxGPUs != 8 {
		t.Errorf("stats %+v", st)
	}
}

func TestReadTraceErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, format, csv, want string
	}{
		{"bad duration", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,1,66,a\n2017-10-09 07:01:55,abc,1,66,a\n", "line 3: duration \"abc\": not a finite number"},
		{"negative", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,-5,1,66,a\n", "line 2: duration -5: must not be negative"},
		{"bad time", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,5,1,5,a\n", "line 2: timestamp \"yesterday\""},
		{"fractional gpus", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,5,1.5,5,a\n", "line 2: num_gpus \"1.5\": not a whole number"},
		{"short row", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,5,1\n", "line 2: 3 fields, the header has 5"},
		{"missing column", FormatPhilly, "timestamp,num_gpus\n2017-10-09 07:01:55,1\n", "line 1: philly header lacks column \"duration\""},
		{"empty", FormatPhilly, "", "line 1: empty trace"},
		{"bare quote", FormatPhilly, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,5,1,5,a\"b\n", "line 2:"},
		{"alibaba order", FormatAlibaba, alibabaHeader + "p1,1000,100,1,1000,,LS,Running,10,5,8\n", "line 2: deletion_time 5 before scheduled_time 8"},
		{"unknown format", "slurm", "a\n1\n", "trace format \"slurm\""},
	}
	for _, c := range cases {
		_, err := ReadTrace(strings.NewReader(c.csv), c.format, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
		var le *LineError
		if c.format != "slurm" && !errors.As(err, &le) {
			t.Errorf("%s: %v is not a LineError", c.name, err)
		}
	}
}

const alibabaHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"

func TestReadAlibaba(t *testing.T) {
	csv := alibabaHeader +
		"openb-pod-0000,12000,16384,1,1000,,LS,Running,100,12537496,100\n" +
		"openb-pod-0001,6000,12288,0,0,,BE,Running,200,900,250\n" + // no GPU
		"openb-pod-0002,6000,12288,2,1000,,BE,Pending,300,900,\n" + // never scheduled
		"openb-pod-0003,6000,12288,8,1000,V100,BE,Succeeded,50,1050,60\n"
	tr, err := ReadTrace(strings.NewReader(csv), FormatAlibaba, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 2 || tr.Skipped["no GPU"] != 1 || tr.Skipped["never scheduled"] != 1 {
		t.Fatalf("jobs %+v skipped %v", tr.Jobs, tr.Skipped)
	}
	if j := tr.Jobs[0]; j.Name != "openb-pod-0003" || j.Arrival != 0 || j.Duration != 990 || j.GPUs != 8 || j.Group != "BE" {
		t.Errorf("first job %+v", j)
	}
	if j := tr.Jobs[1]; j.Arrival != 50 || j.Duration != 12537396 {
		t.Errorf("second job %+v", j)
	}
}

func TestTraceQueuesShareQuotaByGPUHours(t *testing.T) {
	tr := &Trace{Jobs: []TraceJob{{Group: "a", GPUs: 1, Duration: 300}, {Group: "b", GPUs: 1, Duration: 100}}}
	qs := traceQueues(tr, 10, false)
	if len(qs) != 2 || qs[0].GPUs+qs[1].GPUs != 10 || qs[0].Name != "a" || qs[0].GPUs < 7 || qs[0].Cohort != "cluster" {
		t.Errorf("queues %+v", qs)
	}
	if qs := traceQueues(tr, 10, true); len(qs) != 1 || qs[0].GPUs != 10 {
		t.Errorf("single queue %+v", qs)
	}
}
