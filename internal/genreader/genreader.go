// Package genreader is an io.Reader over generated lines, for tests and
// benchmarks of memory bounds: an input of any size (a 1 GiB history, a
// 10^7-row trace) is read without being held or written anywhere, and the
// live heap is sampled while it is read.
package genreader

import (
	"io"
	"runtime"
)

// Reader reads the lines Line appends, in order, until Line says there are
// no more. Every SampleEvery lines it collects garbage and samples the live
// heap (PeakGrowth): what the reader's consumer holds, not the garbage the
// collector has not reached yet, which depends on GC pacing and on whatever
// else the process does.
type Reader struct {
	line        func(dst []byte, i int) ([]byte, bool)
	sampleEvery int
	i           int
	buf         []byte
	done        bool
	base, peak  uint64
}

// New returns a reader of the lines line appends to dst (line i, 0-based;
// false: no line i, the input ends). The heap is measured now, after a
// collection, as the base of PeakGrowth.
func New(sampleEvery int, line func(dst []byte, i int) ([]byte, bool)) *Reader {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return &Reader{line: line, sampleEvery: max(sampleEvery, 1), base: m.HeapAlloc, peak: m.HeapAlloc}
}

func (r *Reader) Read(b []byte) (int, error) {
	for len(r.buf) < len(b) && !r.done {
		var ok bool
		if r.buf, ok = r.line(r.buf, r.i); !ok {
			r.done = true
			break
		}
		if r.i++; r.i%r.sampleEvery == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			r.peak = max(r.peak, m.HeapAlloc)
		}
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

// Lines is the number of lines generated so far.
func (r *Reader) Lines() int { return r.i }

// PeakGrowth is the largest live heap sampled while reading, above the
// live heap at New, in MiB.
func (r *Reader) PeakGrowth() float64 { return float64(int64(r.peak)-int64(r.base)) / (1 << 20) }
