package simulator

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trace formats.
const (
	FormatPhilly  = "philly"
	FormatAlibaba = "alibaba"
)

// TraceJob is one job read from a cluster trace.
type TraceJob struct {
	Line     int     // line in the file (1-based, the header is line 1)
	Name     string  // a name from the trace, or the line
	Arrival  float64 // seconds since the trace's first submission
	Duration float64 // running seconds
	GPUs     int
	Group    string // Philly: the virtual cluster; Alibaba: the QoS class
}

// Trace is a parsed trace, jobs in arrival order (ties: file order).
type Trace struct {
	Format string
	Jobs   []TraceJob
	// Skipped counts rows that are well-formed but unusable, by reason.
	Skipped map[string]int
}

// LineError is a trace error naming the line it was found on.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}
func (e *LineError) Unwrap() error { return e.Err }

// ReadTraceFile reads a trace of the given format.
func ReadTraceFile(path, format string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ReadTrace(bufio.NewReaderSize(f, 1<<20), format)
	var le *LineError
	if errors.As(err, &le) {
		le.File = path
	}
	return t, err
}

// ReadTrace reads a trace from r: format philly (the Pollux artifact's
// philly.csv: timestamp,duration,num_gpus,gpu_time,cluster) or alibaba
// (cluster-trace-gpu-v2023 openb_pod_list_*.csv). Malformed rows are
// errors naming the line; usable-but-irrelevant rows (Alibaba pods without
// GPUs or never scheduled) are skipped and counted.
func ReadTrace(r io.Reader, format string) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, &LineError{Line: 1, Err: errors.New("empty trace: no header line")}
		}
		return nil, &LineError{Line: 1, Err: err}
	}
	cols := map[string]int{}
	for i, h := range header {
		cols[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	t := &Trace{Format: format, Skipped: map[string]int{}}
	var need []string
	switch format {
	case FormatPhilly:
		need = []string{"timestamp", "duration", "num_gpus"}
	case FormatAlibaba:
		need = []string{"name", "num_gpu", "creation_time", "deletion_time", "scheduled_time"}
	default:
		return nil, fmt.Errorf("trace format %q: want %s or %s", format, FormatPhilly, FormatAlibaba)
	}
	for _, n := range need {
		if _, ok := cols[n]; !ok {
			return nil, &LineError{Line: 1, Err: fmt.Errorf("%s header lacks column %q (have %s)", format, n, strings.Join(header, ","))}
		}
	}
	var first float64 = math.Inf(1)
	type raw struct {
		TraceJob
		abs float64
	}
	var rows []raw
	line := 1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &LineError{Line: pe.Line, Err: pe.Err}
			}
			return nil, &LineError{Line: line, Err: err}
		}
		if pl, _ := cr.FieldPos(0); pl > 0 {
			line = pl
		}
		if len(rec) != len(header) {
			return nil, &LineError{Line: line, Err: fmt.Errorf("%d fields, the header has %d", len(rec), len(header))}
		}
		get := func(name string) string { return strings.TrimSpace(rec[cols[name]]) }
		var row raw
		row.Line = line
		var skip string
		switch format {
		case FormatPhilly:
			row.abs, err = parsePhillyTime(get("timestamp"))
			if err == nil {
				row.Duration, err = parseNonNeg("duration", get("duration"))
			}
			if err == nil {
				row.GPUs, err = parseGPUs("num_gpus", get("num_gpus"))
			}
			if c, ok := cols["cluster"]; ok {
				row.Group = strings.TrimSpace(rec[c])
			}
			row.Name = fmt.Sprintf("philly-%d", line-1)
			if err == nil && row.Duration <= 0 {
				skip = "zero duration"
			}
		case FormatAlibaba:
			row.Name = get("name")
			var created, deleted, sched float64
			row.GPUs, err = parseGPUs("num_gpu", get("num_gpu"))
			if err == nil {
				created, err = parseNonNeg("creation_time", get("creation_time"))
			}
			if err == nil {
				deleted, err = parseNonNeg("deletion_time", get("deletion_time"))
			}
			s := get("scheduled_time")
			if err == nil && s != "" {
				sched, err = parseNonNeg("scheduled_time", s)
			}
			if c, ok := cols["qos"]; ok {
				row.Group = strings.TrimSpace(rec[c])
			}
			row.abs = created
			switch {
			case err != nil:
			case row.GPUs == 0:
				skip = "no GPU"
			case s == "":
				skip = "never scheduled"
			case deleted < sched:
				err = fmt.Errorf("deletion_time %v before scheduled_time %v", deleted, sched)
			case deleted == sched:
				skip = "zero duration"
			default:
				row.Duration = deleted - sched
			}
		}
		if err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		if row.Group == "" {
			row.Group = "default"
		}
		if skip != "" {
			t.Skipped[skip]++
			continue
		}
		first = math.Min(first, row.abs)
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].abs < rows[b].abs })
	for _, r := range rows {
		r.Arrival = r.abs - first
		t.Jobs = append(t.Jobs, r.TraceJob)
	}
	if len(t.Jobs) == 0 {
		return nil, fmt.Errorf("trace has no usable job (%d rows read)", line-1)
	}
	return t, nil
}

func parsePhillyTime(s string) (float64, error) {
	tm, err := time.Parse(time.DateTime, s)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: want YYYY-MM-DD hh:mm:ss", s)
	}
	return float64(tm.Unix()), nil
}

func parseNonNeg(name, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q: not a finite number", name, s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%s %v: must not be negative", name, v)
	}
	return v, nil
}

func parseGPUs(name, s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%s %q: not a whole number", name, s)
		}
		v = int(f)
	}
	if v < 0 || v > 1<<20 {
		return 0, fmt.Errorf("%s %d: out of range", name, v)
	}
	return v, nil
}

// Stats summarize a trace (for reports and the embedded scenario's
// derivation).
type TraceStats struct {
	Jobs       int     `json:"jobs"`
	SpanHours  float64 `json:"spanHours"`
	GPUHours   float64 `json:"gpuHours"`
	MeanDemand float64 `json:"meanDemandGPUs"` // GPU-hours / span
	MaxGPUs    int     `json:"maxGPUs"`
}

// Stats computes the trace's summary.
func (t *Trace) Stats() TraceStats {
	var s TraceStats
	s.Jobs = len(t.Jobs)
	last := 0.0
	for _, j := range t.Jobs {
		s.GPUHours += float64(j.GPUs) * j.Duration / 3600
		last = math.Max(last, j.Arrival)
		s.MaxGPUs = max(s.MaxGPUs, j.GPUs)
	}
	s.SpanHours = last / 3600
	if s.SpanHours > 0 {
		s.MeanDemand = s.GPUHours / s.SpanHours
	}
	return s
}
