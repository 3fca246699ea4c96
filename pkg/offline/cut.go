package offline

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/progress-planner/planner/pkg/progress"
)

// Cut is the instant the forecast is made for.
type Cut struct {
	At float64
	// Basis: "last-report" (default), "at" (--at), "fraction-of-end"
	// (--at-fraction × outcome.endSeconds) or "fraction-of-last-report"
	// (--at-fraction × the last report's t, when there is no outcome).
	Basis string
}

// CutSpec is how the flags choose the cut: --at, --at-fraction, or
// neither (the last report).
type CutSpec struct {
	At, Frac       float64
	AtSet, FracSet bool
}

// HistoryCut is a history file read up to its cut: the header, the
// bounded History of the reports with t <= Cut.At, the report lines that
// was and the first one's t.
type HistoryCut struct {
	Header progress.FileHeader
	Cut    Cut
	H      *progress.History
	Read   int
	First  float64
	last   float64 // the latest report's t (-Inf before the first)
}

// NewHistoryCut starts an empty cut of a file with header h.
func NewHistoryCut(h progress.FileHeader, cut Cut) *HistoryCut {
	return &HistoryCut{Header: h, Cut: cut, H: progress.NewHistory(progress.DefaultLimits()), last: math.Inf(-1)}
}

// Add observes r; false once r is past the cut (reports come in time
// order, HistoryReader checks it, so nothing after it is needed).
func (c *HistoryCut) Add(r progress.FileReport) bool {
	if !progress.AtOrBefore(r.T, c.Cut.At) {
		return false
	}
	if c.Read == 0 {
		c.First = r.T
	}
	if c.Header.ReadmittedBefore(c.last, r.T) {
		c.H.Resume()
	}
	c.H.Observe(r.T, r.TrainerStatus)
	c.Read, c.last = c.Read+1, r.T
	return true
}

// Load streams a history file (standard input for "-") into a
// HistoryCut: memory is the bounded History and one line, whatever the
// file's size (docs/limits.md). Only --at-fraction on a file without
// outcome.endSeconds reads it twice (the last report's t first); standard
// input is then spooled to a temporary file. Errors name the file (or
// "stdin") and the line; a file without reports is an error.
func Load(path string, stdin io.Reader, spec CutSpec) (*HistoryCut, error) {
	name := path
	if path == "-" {
		name = "stdin"
		if spec.FracSet {
			tmp, err := spool(stdin)
			if err != nil {
				return nil, fmt.Errorf("stdin: %w", err)
			}
			defer os.Remove(tmp)
			path = tmp
		}
	}
	open := func() (io.ReadCloser, error) {
		if path == "-" {
			return io.NopCloser(stdin), nil
		}
		return os.Open(path)
	}
	c, err := streamCut(open, spec)
	var le *progress.LineError
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
		return nil, err // the error names the path already
	case !errors.As(err, &le):
		// Only "no header line at all" comes back without a line: the
		// header belongs on line 1.
		err = &progress.LineError{Line: 1, Err: err}
	}
	return nil, fmt.Errorf("%s: %w", name, err)
}

var errNoReports = &progress.LineError{Line: 2, Err: errors.New("no status reports after the header")}

func streamCut(open func() (io.ReadCloser, error), spec CutSpec) (*HistoryCut, error) {
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer func() { rc.Close() }()
	hr, err := progress.NewHistoryReader(rc)
	if err != nil {
		return nil, err
	}
	cut := Cut{At: math.Inf(1), Basis: "last-report"}
	switch o := hr.Header.Outcome; {
	case spec.AtSet:
		cut = Cut{At: spec.At, Basis: "at"}
	case spec.FracSet && o != nil && o.EndSeconds > 0 && !math.IsInf(o.EndSeconds, 0):
		cut = Cut{At: spec.Frac * o.EndSeconds, Basis: "fraction-of-end"}
	case spec.FracSet:
		last, err := lastReportT(hr)
		if err != nil {
			return nil, err
		}
		rc.Close()
		if rc, err = open(); err != nil {
			return nil, err
		}
		if hr, err = progress.NewHistoryReader(rc); err != nil {
			return nil, err
		}
		cut = Cut{At: spec.Frac * last, Basis: "fraction-of-last-report"}
	}
	c := NewHistoryCut(hr.Header, cut)
	seen, last := false, 0.0
	for {
		r, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		seen, last = true, r.T
		if !c.Add(r) {
			break
		}
	}
	if !seen {
		return nil, errNoReports
	}
	if cut.Basis == "last-report" {
		c.Cut.At = last
	}
	return c, nil
}

// lastReportT reads hr to its end and returns the last report's t.
func lastReportT(hr *progress.HistoryReader) (float64, error) {
	last, seen := 0.0, false
	for {
		r, err := hr.Next()
		if err == io.EOF {
			if !seen {
				return 0, errNoReports
			}
			return last, nil
		}
		if err != nil {
			return 0, err
		}
		last, seen = r.T, true
	}
}

// spool copies r to a temporary file and returns its path.
func spool(r io.Reader) (string, error) {
	f, err := os.CreateTemp("", "planner-history-*.jsonl")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
