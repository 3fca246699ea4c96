package progress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// HistoryFileKind and HistoryFileVersion identify the JSON Lines progress
// history format (one header line, then one trainerStatus report a line).
const (
	HistoryFileKind    = "ProgressHistory"
	HistoryFileVersion = 1
)

// maxLineBytes bounds one line of a history file; a real report is well
// under 4 KiB.
const maxLineBytes = 1 << 20

// HistoryFile is a parsed progress history file.
type HistoryFile struct {
	Header  FileHeader
	Reports []FileReport
}

// FileHeader is line 1 of a history file. Unknown fields are kept in Extra
// so that a read/write round trip loses nothing.
type FileHeader struct {
	Kind        string                     `json:"kind"`
	Version     int                        `json:"version"`
	Name        string                     `json:"name"`
	Source      json.RawMessage            `json:"source,omitempty"`
	Objective   *FileObjective             `json:"objective,omitempty"`
	TimeBasis   string                     `json:"timeBasis,omitempty"`
	Outcome     *Outcome                   `json:"outcome,omitempty"`
	DerivedFrom *string                    `json:"derivedFrom"`
	Incident    map[string]json.RawMessage `json:"incident,omitempty"`
	RunInfo     map[string]json.RawMessage `json:"runInfo,omitempty"`
	Extra       map[string]json.RawMessage `json:"-"`
}

// FileObjective is the header's objective; Direction is "minimize" or
// "maximize", Target null when the run has none.
type FileObjective struct {
	Metric    string   `json:"metric"`
	Direction string   `json:"direction"`
	Target    *float64 `json:"target"`
}

// Outcome is how the run ended. Final values are numbers or "nan".
type Outcome struct {
	Status     string                     `json:"status"`
	EndSeconds float64                    `json:"endSeconds"`
	Final      map[string]json.RawMessage `json:"final,omitempty"`
}

// FileReport is one status report observed t seconds after the run start.
type FileReport struct {
	T             float64       `json:"t"`
	TrainerStatus TrainerStatus `json:"trainerStatus"`
}

var headerFields = map[string]bool{"kind": true, "version": true, "name": true, "source": true, "objective": true,
	"timeBasis": true, "outcome": true, "derivedFrom": true, "incident": true, "runInfo": true}

// UnmarshalJSON keeps unknown header fields in Extra.
func (h *FileHeader) UnmarshalJSON(b []byte) error {
	type plain FileHeader
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, v := range all {
		if !headerFields[k] {
			if p.Extra == nil {
				p.Extra = map[string]json.RawMessage{}
			}
			p.Extra[k] = v
		}
	}
	*h = FileHeader(p)
	return nil
}

// MarshalJSON writes the known fields followed by Extra.
func (h FileHeader) MarshalJSON() ([]byte, error) {
	type plain FileHeader
	b, err := json.Marshal(plain(h))
	if err != nil || len(h.Extra) == 0 {
		return b, err
	}
	extra, err := json.Marshal(h.Extra)
	if err != nil {
		return nil, err
	}
	// Splice {"known"...} and {"extra"...} into one object.
	out := append(b[:len(b)-1:len(b)-1], ',')
	return append(out, extra[1:]...), nil
}

// ObjectiveSpec returns the header's objective, or ok=false when the
// header names none (or names it badly; ReadHistoryFile refuses such a
// header).
func (h FileHeader) ObjectiveSpec() (Objective, bool) {
	o, named, err := h.objective()
	return o, named && err == nil
}

// objective is the header's objective; named is false when the header has
// none (absent, or every field empty).
func (h FileHeader) objective() (o Objective, named bool, err error) {
	fo := h.Objective
	if fo == nil || (fo.Metric == "" && fo.Direction == "" && fo.Target == nil) {
		return Objective{}, false, nil
	}
	o = Objective{Metric: CanonicalMetric(fo.Metric), Direction: Direction(fo.Direction), Target: fo.Target}
	if o.Direction == "" {
		o.Direction = Minimize
	}
	return o, true, o.Validate()
}

// RunInfoFloat returns a numeric runInfo field (e.g. "gpus").
func (h FileHeader) RunInfoFloat(key string) (float64, bool) { return rawFloat(h.RunInfo[key]) }

// RunInfoString returns a string runInfo field (e.g. "progressUnit").
func (h FileHeader) RunInfoString(key string) string { return rawString(h.RunInfo[key]) }

// IncidentType is the incident's type ("hang", "divergence", …) or "".
func (h FileHeader) IncidentType() string { return rawString(h.Incident["type"]) }

// IncidentFloat returns a numeric incident field (e.g. "atSeconds").
func (h FileHeader) IncidentFloat(key string) (float64, bool) { return rawFloat(h.Incident[key]) }

// ReadmittedBefore reports whether the job's Workload was admitted again
// after an eviction (incident.resumeSeconds of a preempt_resume file) after
// the report at prev and by the report at t. A replay calls History.Resume
// before observing that report, as the controller does when it sees the
// readmission (before the restarted job reports). prev is -Inf before the
// first report.
func (h FileHeader) ReadmittedBefore(prev, t float64) bool {
	at, ok := h.IncidentFloat("resumeSeconds")
	return ok && prev < at && at <= t
}

// Dataset is source.dataset, or "" when absent.
func (h FileHeader) Dataset() string {
	var s struct {
		Dataset string `json:"dataset"`
	}
	if len(h.Source) > 0 && json.Unmarshal(h.Source, &s) == nil {
		return s.Dataset
	}
	return ""
}

// FinalValue is outcome.final[metric]: NaN for "nan", ok=false when absent.
func (o *Outcome) FinalValue(metric string) (float64, bool) {
	if o == nil {
		return 0, false
	}
	raw, ok := o.Final[metric]
	if !ok {
		return 0, false
	}
	if v, ok := rawFloat(raw); ok {
		return v, true
	}
	if s := rawString(raw); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

func rawFloat(raw json.RawMessage) (float64, bool) {
	var v float64
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}

func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// LineError is a history-file error that names the line it was found on.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadHistoryFile parses a JSON Lines progress history. It is strict: an
// unknown kind or version, an invalid objective, malformed JSON, a missing
// or non-finite t, or t going backwards are errors naming the line. Report
// *contents* are not validated here (that is Parse's job, which rejects
// values without losing the rest), so a file with a garbage metric still
// loads. It keeps every report: memory grows with the file; HistoryReader
// reads one report at a time.
func ReadHistoryFile(r io.Reader) (*HistoryFile, error) { return ReadHistoryFileMax(r, math.MaxInt) }

// ReadHistoryFileMax is ReadHistoryFile for a caller that must hold the
// whole file: a file of more than maxReports reports is an error as soon
// as that many have been read.
func ReadHistoryFileMax(r io.Reader, maxReports int) (*HistoryFile, error) {
	hr, err := NewHistoryReader(r)
	if err != nil {
		return nil, err
	}
	f := &HistoryFile{Header: hr.Header}
	for {
		rep, err := hr.Next()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return nil, err
		}
		if len(f.Reports) == maxReports {
			return nil, &LineError{hr.line, fmt.Errorf("more than %d reports", maxReports)}
		}
		f.Reports = append(f.Reports, rep)
	}
}

// HistoryReader streams a history file: NewHistoryReader reads the
// header, Next one report at a time, with ReadHistoryFile's checks. Memory
// is one line (at most maxLineBytes) whatever the file's size, so a
// caller feeding a bounded History stays bounded.
type HistoryReader struct {
	Header FileHeader
	sc     *bufio.Scanner
	line   int
	prevT  float64
}

// NewHistoryReader reads and checks the header (the first non-blank line).
func NewHistoryReader(r io.Reader) (*HistoryReader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	hr := &HistoryReader{sc: sc, prevT: math.Inf(-1)}
	b, err := hr.nextLine()
	if err == io.EOF {
		return nil, errors.New("empty history file: no header line")
	}
	if err != nil {
		return nil, err
	}
	h := &hr.Header
	if err := json.Unmarshal(b, h); err != nil {
		return nil, &LineError{hr.line, fmt.Errorf("header: %w", err)}
	}
	if h.Kind != HistoryFileKind {
		return nil, &LineError{hr.line, fmt.Errorf("header: kind %q, want %q", h.Kind, HistoryFileKind)}
	}
	if h.Version != HistoryFileVersion {
		return nil, &LineError{hr.line, fmt.Errorf("header: unsupported version %d (this planner reads version %d)", h.Version, HistoryFileVersion)}
	}
	if _, _, err := h.objective(); err != nil {
		// Refused, not ignored: forecasting another metric than the one
		// named would answer a question nobody asked.
		return nil, &LineError{hr.line, fmt.Errorf("header: %w", err)}
	}
	return hr, nil
}

// Line is the line of the last header or report read.
func (hr *HistoryReader) Line() int { return hr.line }

// Next returns the next report, or io.EOF after the last.
func (hr *HistoryReader) Next() (FileReport, error) {
	b, err := hr.nextLine()
	if err != nil {
		return FileReport{}, err
	}
	var rep struct {
		T             *float64      `json:"t"`
		TrainerStatus TrainerStatus `json:"trainerStatus"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return FileReport{}, &LineError{hr.line, fmt.Errorf("report: %w", err)}
	}
	if rep.T == nil {
		return FileReport{}, &LineError{hr.line, errors.New("report: missing t")}
	}
	t := *rep.T
	if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return FileReport{}, &LineError{hr.line, fmt.Errorf("report: t=%v is not a finite non-negative number", t)}
	}
	if t < hr.prevT {
		return FileReport{}, &LineError{hr.line, fmt.Errorf("report: t=%v goes backwards (previous %v)", t, hr.prevT)}
	}
	hr.prevT = t
	return FileReport{T: t, TrainerStatus: rep.TrainerStatus}, nil
}

// nextLine is the next non-blank line, io.EOF at the end.
func (hr *HistoryReader) nextLine() ([]byte, error) {
	for hr.sc.Scan() {
		hr.line++
		if b := bytes.TrimSpace(hr.sc.Bytes()); len(b) > 0 {
			return b, nil
		}
	}
	if err := hr.sc.Err(); err != nil {
		return nil, &LineError{hr.line + 1, fmt.Errorf("read: %w", err)}
	}
	return nil, io.EOF
}

// ReadHistoryPath reads a history file from path, or standard input for "-".
func ReadHistoryPath(path string) (*HistoryFile, error) {
	if path == "-" {
		f, err := ReadHistoryFile(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		return f, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	f, err := ReadHistoryFile(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// WriteHistoryFile writes f in the JSON Lines format ReadHistoryFile reads.
func WriteHistoryFile(w io.Writer, f *HistoryFile) error {
	bw := bufio.NewWriter(w)
	hdr := f.Header
	if hdr.Kind == "" {
		hdr.Kind = HistoryFileKind
	}
	if hdr.Version == 0 {
		hdr.Version = HistoryFileVersion
	}
	b, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	bw.Write(b)
	bw.WriteByte('\n')
	for i, r := range f.Reports {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("write report %d: %w", i, err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// CutEps is the tolerance of the one cut rule: a report at t belongs to
// a history as of at when t <= at + CutEps (the corpus's baseline uses the
// same). planner forecast, report and backtest all cut this way.
const CutEps = 1e-9

// AtOrBefore is the cut rule: whether a report at t is part of the
// history as of at.
func AtOrBefore(t, at float64) bool { return t <= at+CutEps }
