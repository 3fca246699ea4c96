package progress

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
)

// The compact encoding of a History, stored in ProgressForecast.status.
// Columnar (version 1): times are a dense array; every other column is
// written dense when it changes at most points, else as a change list
// [i0,v0,i1,v1,…] (a value holds until the next change). NaN is null.
// Stored (version 2): that JSON gzipped, base64 in {"v":2,"gz":…}, about
// half the size (TestHistoryCodecCompressedAndVersion1 logs both: 7.8 KB
// for 13.8 KB; BenchmarkHistoryEncode reports the stored size of a full
// history), and the history is most of a ProgressForecast's bytes in etcd.
// Version 1 is still read.
const (
	historyColumnarVersion = 1
	historyCodecVersion    = 2
	// maxColumnarBytes bounds a decompressed history: a stored history is
	// tenant-editable, and a gzip stream can expand a thousandfold. A full
	// history under the largest limits is a few hundred KB.
	maxColumnarBytes = 4 << 20
)

// gzipWriters reuses compressors: one costs hundreds of KB to set up, and
// every checkpoint of every job encodes a history.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// storedHistory is the stored envelope.
type storedHistory struct {
	V  int    `json:"v"`
	GZ string `json:"gz,omitempty"`
}

type nullFloat float64

func (v nullFloat) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

func (v *nullFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nullFloat(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*v = nullFloat(f)
	return nil
}

type column struct {
	Dense   []nullFloat `json:"d,omitempty"`
	Changes []nullFloat `json:"c,omitempty"`
}

type historyJSON struct {
	V          int                  `json:"v"`
	T          []float64            `json:"t"`
	SegStarts  []int                `json:"seg,omitempty"`
	NonFinite  []int                `json:"nf,omitempty"`
	NaNMetrics map[string][]int     `json:"nanm,omitempty"`
	Cols       map[string]column    `json:"cols,omitempty"`
	LastReport nullFloat            `json:"last"`
	Heartbeats int                  `json:"hb,omitempty"`
	Thinned    int                  `json:"thin,omitempty"`
	LongestGap float64              `json:"gap,omitempty"`
	FirstNaN   nullFloat            `json:"firstNaN"`
	Rejections map[RejectReason]int `json:"rej,omitempty"`
	Recent     []Rejection          `json:"recent,omitempty"`
}

// counter columns and their accessors.
var counterCols = []struct {
	name string
	get  func(*Point) *float64
}{
	{"step", func(p *Point) *float64 { return &p.Step }},
	{"total", func(p *Point) *float64 { return &p.TotalSteps }},
	{"epoch", func(p *Point) *float64 { return &p.Epoch }},
	{"totalEpochs", func(p *Point) *float64 { return &p.TotalEpochs }},
	{"progress", func(p *Point) *float64 { return &p.Progress }},
	{"eta", func(p *Point) *float64 { return &p.ReportedETA }},
}

func encodeColumn(n int, get func(i int) float64) (column, bool) {
	changes := 0
	allNaN := true
	for i := 0; i < n; i++ {
		v := get(i)
		if !math.IsNaN(v) {
			allNaN = false
		}
		if i == 0 || !sameF(v, get(i-1)) {
			changes++
		}
	}
	if allNaN {
		return column{}, false
	}
	if 2*changes >= n {
		d := make([]nullFloat, n)
		for i := range d {
			d[i] = nullFloat(get(i))
		}
		return column{Dense: d}, true
	}
	c := make([]nullFloat, 0, 2*changes)
	for i := 0; i < n; i++ {
		if i == 0 || !sameF(get(i), get(i-1)) {
			c = append(c, nullFloat(i), nullFloat(get(i)))
		}
	}
	return column{Changes: c}, true
}

func (c column) decode(n int) ([]float64, error) {
	out := make([]float64, n)
	switch {
	case c.Dense != nil:
		if len(c.Dense) != n {
			return nil, fmt.Errorf("dense column has %d values for %d points", len(c.Dense), n)
		}
		for i, v := range c.Dense {
			out[i] = float64(v)
		}
	default:
		if len(c.Changes)%2 != 0 {
			return nil, fmt.Errorf("change list has odd length %d", len(c.Changes))
		}
		for i := range out {
			out[i] = math.NaN()
		}
		for k := 0; k < len(c.Changes); k += 2 {
			i := float64(c.Changes[k])
			if i != math.Trunc(i) || i < 0 || int(i) >= n || (k > 0 && i <= float64(c.Changes[k-2])) {
				return nil, fmt.Errorf("change list index %v invalid", i)
			}
			for j := int(i); j < n; j++ {
				out[j] = float64(c.Changes[k+1])
			}
		}
	}
	return out, nil
}

// MarshalJSON encodes the history compactly and compresses it (version
// 2, above).
func (h *History) MarshalJSON() ([]byte, error) {
	columnar, err := h.marshalColumnar()
	if err != nil {
		return nil, err
	}
	var z bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&z)
	if _, err := w.Write(columnar); err != nil {
		return nil, fmt.Errorf("compress history: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress history: %w", err)
	}
	return json.Marshal(storedHistory{V: historyCodecVersion, GZ: base64.StdEncoding.EncodeToString(z.Bytes())})
}

// marshalColumnar is the version 1 encoding.
func (h *History) marshalColumnar() ([]byte, error) {
	n := len(h.points)
	e := historyJSON{V: historyColumnarVersion, T: make([]float64, n), Cols: map[string]column{},
		LastReport: nullFloat(h.lastReport), Heartbeats: h.heartbeats, Thinned: h.thinned, LongestGap: h.longestGap, FirstNaN: nullFloat(h.firstNaN),
		Recent: h.rejRecent}
	if len(h.rejCount) > 0 {
		e.Rejections = h.rejCount
	}
	for i, p := range h.points {
		e.T[i] = p.T
		if i > 0 && p.Seg != h.points[i-1].Seg {
			e.SegStarts = append(e.SegStarts, i)
		}
		if p.NonFinite {
			e.NonFinite = append(e.NonFinite, i)
		}
		for _, m := range p.NaNMetrics {
			if e.NaNMetrics == nil {
				e.NaNMetrics = map[string][]int{}
			}
			e.NaNMetrics[m] = append(e.NaNMetrics[m], i)
		}
	}
	for _, cc := range counterCols {
		if col, ok := encodeColumn(n, func(i int) float64 { return *cc.get(&h.points[i]) }); ok {
			e.Cols[cc.name] = col
		}
	}
	for c, name := range h.names {
		if col, ok := encodeColumn(n, func(i int) float64 { return h.points[i].val(c) }); ok {
			e.Cols["m:"+name] = col
		}
	}
	return json.Marshal(e)
}

// UnmarshalHistory decodes a history written by MarshalJSON, validating it
// (a status edited by hand must not smuggle in an impossible history), and
// applies limits (thinning if the stored history is larger).
//
// After the envelope, decodeStages rebuild the points one part at a time,
// each validating what it reads; the first error refuses the history.
func UnmarshalHistory(b []byte, l Limits) (*History, error) {
	columnar, err := decompress(b)
	if err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	var e historyJSON
	if err := json.Unmarshal(columnar, &e); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	if e.V != historyColumnarVersion {
		return nil, fmt.Errorf("decode history: unsupported version %d", e.V)
	}
	h := NewHistory(l)
	for _, stage := range decodeStages {
		if err := stage(h, &e); err != nil {
			return nil, fmt.Errorf("decode history: %w", err)
		}
	}
	for len(h.points) > h.limits.MaxPoints && h.thin() > 0 {
	}
	return h, nil
}

// decompress returns the columnar JSON of a stored history: a version 2
// envelope's, bounded by maxColumnarBytes, or b itself (version 1, and
// anything else, which the columnar decoding refuses).
func decompress(b []byte) ([]byte, error) {
	var env storedHistory
	if err := json.Unmarshal(b, &env); err != nil || env.V != historyCodecVersion {
		return b, nil
	}
	z, err := base64.StdEncoding.DecodeString(env.GZ)
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", env.V, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", env.V, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxColumnarBytes+1))
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", env.V, err)
	}
	if len(out) > maxColumnarBytes {
		return nil, fmt.Errorf("version %d: decompressed history exceeds %d bytes", env.V, maxColumnarBytes)
	}
	return out, nil
}

// decodeStages are UnmarshalHistory's steps, in order: the points' times
// first (they fix the number of points), then what marks points
// (segments, non-finite values), the counters, the metric series, the
// counters' ranges, and the history's own counts.
var decodeStages = [...]func(h *History, e *historyJSON) error{
	decodeTimes,
	decodeSegments,
	decodeNonFinite,
	decodeCounters,
	decodeMetrics,
	checkCounters,
	decodeCounts,
}

// decodeTimes: one point per time, finite and non-decreasing.
func decodeTimes(h *History, e *historyJSON) error {
	h.points = make([]Point, len(e.T))
	for i, t := range e.T {
		if math.IsNaN(t) || math.IsInf(t, 0) || (i > 0 && t < e.T[i-1]) {
			return fmt.Errorf("time %d (%v) not finite and non-decreasing", i, t)
		}
		h.points[i] = Point{T: t}
	}
	return nil
}

// decodeSegments: each segment start, increasing and within the points,
// begins the next segment.
func decodeSegments(h *History, e *historyJSON) error {
	seg := 0
	k := 0
	for i := range h.points {
		if k < len(e.SegStarts) && e.SegStarts[k] == i {
			seg++
			k++
		}
		h.points[i].Seg = seg
	}
	if k != len(e.SegStarts) {
		return fmt.Errorf("segment starts out of range")
	}
	return nil
}

// decodeNonFinite: the points marked non-finite, and the metrics that were
// NaN/Inf at each point (by name order, at most MaxMetrics a point).
func decodeNonFinite(h *History, e *historyJSON) error {
	n := len(h.points)
	for _, i := range e.NonFinite {
		if i < 0 || i >= n {
			return fmt.Errorf("non-finite index %d out of range", i)
		}
		h.points[i].NonFinite = true
	}
	var nanNames []string
	for m := range e.NaNMetrics {
		nanNames = append(nanNames, m)
	}
	slices.Sort(nanNames)
	for _, m := range nanNames {
		for _, i := range e.NaNMetrics[m] {
			if i < 0 || i >= n || len(h.points[i].NaNMetrics) >= h.limits.MaxMetrics {
				return fmt.Errorf("NaN-metric index %d out of range", i)
			}
			h.points[i].NaNMetrics = append(h.points[i].NaNMetrics, m)
		}
	}
	return nil
}

// decodeCounters: the counter columns (NaN where a column is absent).
func decodeCounters(h *History, e *historyJSON) error {
	n := len(h.points)
	for _, cc := range counterCols {
		col, ok := e.Cols[cc.name]
		v := make([]float64, n)
		for i := range v {
			v[i] = math.NaN()
		}
		if ok {
			var err error
			if v, err = col.decode(n); err != nil {
				return fmt.Errorf("column %s: %w", cc.name, err)
			}
		}
		for i := range h.points {
			*cc.get(&h.points[i]) = v[i]
		}
	}
	return nil
}

// decodeMetrics: the metric series ("m:NAME" columns) in name order, at
// most MaxMetrics of them besides those always kept.
func decodeMetrics(h *History, e *historyJSON) error {
	var names []string
	for key := range e.Cols {
		if len(key) > 2 && key[:2] == "m:" {
			names = append(names, key[2:])
		}
	}
	slices.Sort(names)
	kept := 0
	for _, name := range names {
		if !h.alwaysKept(name) {
			kept++
		}
	}
	if kept > h.limits.MaxMetrics {
		return fmt.Errorf("%d metric series exceed the limit %d", len(names), h.limits.MaxMetrics)
	}
	for c, name := range names {
		h.index[name] = c
		h.names = append(h.names, name)
		v, err := e.Cols["m:"+name].decode(len(h.points))
		if err != nil {
			return fmt.Errorf("metric %s: %w", name, err)
		}
		for i := range h.points {
			if h.points[i].vals == nil {
				h.points[i].vals = make([]float64, 0, len(names))
			}
			h.points[i].vals = append(h.points[i].vals, v[i])
		}
	}
	return nil
}

// lastSegmentStart is the index of the first point of the last segment.
func lastSegmentStart(pts []Point) int {
	i := len(pts) - 1
	for i > 0 && pts[i-1].Seg == pts[len(pts)-1].Seg {
		i--
	}
	return max(i, 0)
}

// checkCounters: no negative counter or ETA, progress within 0–1.
func checkCounters(h *History, _ *historyJSON) error {
	for i := range h.points {
		p := &h.points[i]
		if p.Step < 0 || p.TotalSteps < 0 || p.Progress < 0 || p.Progress > 1 || p.ReportedETA < 0 {
			return fmt.Errorf("point %d holds a negative or out-of-range counter", i)
		}
	}
	return nil
}

// decodeCounts: the last-report time (never before the last point), the
// heartbeat, thinning and rejection counts, the longest gap (no longer
// than the last segment) and the most recent rejections (at most
// MaxRejections).
func decodeCounts(h *History, e *historyJSON) error {
	n := len(h.points)
	if g := e.LongestGap; g < 0 || (g > 0 && (n == 0 || g > e.T[n-1]-e.T[lastSegmentStart(h.points)])) {
		return fmt.Errorf("longest gap %v is negative or longer than the last segment", g)
	}
	h.longestGap = e.LongestGap
	h.lastReport = float64(e.LastReport)
	if n > 0 && (math.IsNaN(h.lastReport) || h.lastReport < e.T[n-1]) {
		h.lastReport = e.T[n-1]
	}
	h.heartbeats, h.thinned, h.firstNaN = e.Heartbeats, e.Thinned, float64(e.FirstNaN)
	for r, c := range e.Rejections {
		h.rejCount[r] = c
	}
	h.rejRecent = e.Recent
	if len(h.rejRecent) > h.limits.MaxRejections {
		h.rejRecent = h.rejRecent[len(h.rejRecent)-h.limits.MaxRejections:]
	}
	return nil
}
