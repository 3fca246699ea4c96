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

// ReadTraceFile reads a trace of the given format (limit as in ReadTrace).
func ReadTraceFile(path, format string, limit int) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ReadTrace(bufio.NewReaderSize(f, 1<<20), format, limit)
	var le *LineError
	if errors.As(err, &le) {
		le.File = path
	}
	return t, err
}

// ReadTrace reads a trace from r: format philly (the Pollux artifact's
// philly.csv: timestamp,duration,num_gpus,gpu_time,cluster) or alibaba
// (cluster-trace-gpu-v2023 openb_pod_list_*.csv). Malformed rows are
// errors naming the line; usable-but-irrelevant rows (pods or jobs without
// GPUs, never scheduled) are skipped and counted. Every number is checked
// against MaxGPUs and MaxSeconds.
//
// limit > 0 keeps the first limit usable rows of the file, in file order,
// and stops reading there: time and memory are O(limit) whatever the
// trace's size, and rows after them are never read (nor checked). The
// kept rows are then sorted by submission as usual. They are the limit
// earliest submissions only when the file is sorted by submission: the
// Alibaba pod list is; the Pollux philly.csv is not (44,879 of its 82,247
// rows are earlier than the row before; none of its first 1,000 rows is
// among its 1,000 earliest). limit 0 keeps every usable row, at most
// MaxJobs.
func ReadTrace(r io.Reader, format string, limit int) (*Trace, error) {
	if limit < 0 || limit > MaxJobs {
		return nil, fmt.Errorf("trace limit %d: must be in [0, %d]", limit, MaxJobs)
	}
	tr, err := newTraceReader(r, format)
	if err != nil {
		return nil, err
	}
	t := &Trace{Format: format, Skipped: map[string]int{}}
	rows, err := tr.usableRows(limit, t.Skipped)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("trace has no usable job (%d rows read%s)", tr.line-1, skippedText(t.Skipped))
	}
	if t.Jobs, err = arrivals(rows); err != nil {
		return nil, err
	}
	return t, nil
}

// traceReader reads a trace's rows after its header.
type traceReader struct {
	cr     *csv.Reader
	format string
	header []string
	cols   map[string]int // column index by (trimmed) header name
	line   int            // the line of the latest row read
}

// newTraceReader reads the header and checks that it has the columns the
// format needs.
func newTraceReader(r io.Reader, format string) (*traceReader, error) {
	cr := csv.NewReader(&lineCapReader{r: r, max: MaxTraceLineBytes})
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, &LineError{Line: 1, Err: errors.New("empty trace: no header line")}
		}
		return nil, &LineError{Line: 1, Err: err}
	}
	tr := &traceReader{cr: cr, format: format, header: header, cols: map[string]int{}, line: 1}
	for i, h := range header {
		tr.cols[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
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
		if _, ok := tr.cols[n]; !ok {
			return nil, &LineError{Line: 1, Err: fmt.Errorf("%s header lacks column %q (have %s)", format, n, strings.Join(header, ","))}
		}
	}
	return tr, nil
}

// usableRows reads rows until EOF or limit usable ones (limit 0: all, at
// most MaxJobs), counting the skipped ones by reason; a malformed row is
// an error naming its line.
func (tr *traceReader) usableRows(limit int, skipped map[string]int) ([]traceRow, error) {
	var rows []traceRow
	for limit == 0 || len(rows) < limit {
		rec, err := tr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		row, skip, err := tr.parseRow(rec)
		if err == nil && skip == "" {
			err = checkSeconds("duration", row.Duration)
		}
		if err != nil {
			return nil, &LineError{Line: tr.line, Err: err}
		}
		if row.Group == "" {
			row.Group = "default"
		}
		if skip != "" {
			skipped[skip]++
			continue
		}
		if len(rows) == MaxJobs { // limit 0: limit > 0 stops the loop first
			return nil, &LineError{Line: tr.line, Err: fmt.Errorf("more than %d usable jobs (the limit of one simulation): replay a part with --limit", MaxJobs)}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// next reads one record with as many fields as the header (io.EOF at the
// end) and sets tr.line to the line it starts on.
func (tr *traceReader) next() ([]string, error) {
	rec, err := tr.cr.Read()
	if err == io.EOF {
		return nil, err
	}
	tr.line++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, &LineError{Line: pe.Line, Err: pe.Err}
		}
		return nil, &LineError{Line: tr.line, Err: err}
	}
	if pl, _ := tr.cr.FieldPos(0); pl > 0 {
		tr.line = pl
	}
	if len(rec) != len(tr.header) {
		return nil, &LineError{Line: tr.line, Err: fmt.Errorf("%d fields, the header has %d", len(rec), len(tr.header))}
	}
	return rec, nil
}

// get is the trimmed value of column name in rec.
func (tr *traceReader) get(rec []string, name string) string {
	return strings.TrimSpace(rec[tr.cols[name]])
}

// parseRow parses one record in the trace's format: the row, or why it is
// skipped, or what is malformed.
func (tr *traceReader) parseRow(rec []string) (row traceRow, skip string, err error) {
	row.Line = tr.line
	if tr.format == FormatPhilly {
		skip, err = tr.phillyRow(rec, &row)
	} else {
		skip, err = tr.alibabaRow(rec, &row)
	}
	return row, skip, err
}

// phillyRow: submission time, duration and GPUs; the virtual cluster is
// the group. A job without duration or GPUs is skipped.
func (tr *traceReader) phillyRow(rec []string, row *traceRow) (skip string, err error) {
	row.abs, err = parsePhillyTime(tr.get(rec, "timestamp"))
	if err == nil {
		row.Duration, err = parseNonNeg("duration", tr.get(rec, "duration"))
	}
	if err == nil {
		row.GPUs, err = parseGPUs("num_gpus", tr.get(rec, "num_gpus"))
	}
	if c, ok := tr.cols["cluster"]; ok {
		row.Group = strings.TrimSpace(rec[c])
	}
	row.Name = fmt.Sprintf("philly-%d", tr.line-1)
	switch {
	case err != nil:
	case row.Duration <= 0:
		skip = "zero duration"
	case row.GPUs == 0:
		skip = "no GPU"
	}
	return skip, err
}

// alibabaRow: a pod's creation is its submission and it runs from its
// scheduling to its deletion; the QoS class is the group. A pod without
// GPUs, never scheduled or deleted as it was scheduled is skipped.
func (tr *traceReader) alibabaRow(rec []string, row *traceRow) (skip string, err error) {
	row.Name = tr.get(rec, "name")
	var created, deleted, sched float64
	row.GPUs, err = parseGPUs("num_gpu", tr.get(rec, "num_gpu"))
	if err == nil {
		created, err = parseNonNeg("creation_time", tr.get(rec, "creation_time"))
	}
	if err == nil {
		deleted, err = parseNonNeg("deletion_time", tr.get(rec, "deletion_time"))
	}
	s := tr.get(rec, "scheduled_time")
	if err == nil && s != "" {
		sched, err = parseNonNeg("scheduled_time", s)
	}
	if c, ok := tr.cols["qos"]; ok {
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
	return skip, err
}

// arrivals sorts the rows by submission and makes each arrival relative to
// the first submission.
func arrivals(rows []traceRow) ([]TraceJob, error) {
	sort.Slice(rows, func(a, b int) bool { return rows[a].before(rows[b]) })
	first := rows[0].abs
	jobs := make([]TraceJob, len(rows))
	for i, r := range rows {
		r.Arrival = r.abs - first
		if err := checkSeconds("arrival (seconds after the first submission)", r.Arrival); err != nil {
			return nil, &LineError{Line: r.Line, Err: err}
		}
		jobs[i] = r.TraceJob
	}
	return jobs, nil
}

// skippedText is "; skipped: 2 no GPU, 1 zero duration" (reasons sorted).
func skippedText(skipped map[string]int) string {
	var parts []string
	for reason, n := range skipped {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return "; skipped: " + strings.Join(parts, ", ")
}

// traceRow is a trace job with its absolute submission time.
type traceRow struct {
	TraceJob
	abs float64
}

// before orders rows by submission, ties by line.
func (a traceRow) before(b traceRow) bool {
	return a.abs < b.abs || (a.abs == b.abs && a.Line < b.Line)
}

// lineCapReader fails a read once a line exceeds max bytes: encoding/csv
// buffers a whole record, so one endless line would otherwise be read
// into memory.
type lineCapReader struct {
	r   io.Reader
	max int
	run int // bytes since the last newline
}

func (l *lineCapReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.run = 0
			continue
		}
		if l.run++; l.run > l.max {
			return i, fmt.Errorf("a line longer than %d bytes", l.max)
		}
	}
	return n, err
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
		if !(f >= 0 && f <= MaxGPUs) { // before the conversion: 1e300 has no int
			return 0, fmt.Errorf("%s %v: must be in [0, %d]", name, f, MaxGPUs)
		}
		v = int(f)
	}
	return v, checkGPUs(name, v, 0)
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
