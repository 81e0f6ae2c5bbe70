package qlog

import (
	"bytes"
	"slices"
	"testing"
)

func TestReleases_roundTrip(t *testing.T) {
	for _, seqs := range [][]uint64{
		{5},
		{1, 2, 3, 4, 10, 12, 13},
		{7, 3, 3, 1 << 40, 2},
	} {
		var want []uint64
		want = append(want, seqs...)
		slices.Sort(want)
		want = slices.Compact(want)
		b := appendReleases(nil, 7, slices.Clone(seqs))
		var got []uint64
		for len(b) > 0 {
			f, err := parseFrame(b, 7)
			if err != nil || f.typ != typeRelease {
				t.Fatalf("frame: %+v, %v", f, err)
			}
			if err := parseReleases(f.body, 1<<41, func(s uint64) { got = append(got, s) }); err != nil {
				t.Fatal(err)
			}
			b = b[f.size:]
		}
		if !slices.Equal(got, want) {
			t.Errorf("released %v, want %v", got, want)
		}
	}
	many := make([]uint64, 20000)
	for i := range many {
		many[i] = uint64(3 * i)
	}
	if b := appendReleases(nil, 7, many); len(b) < 2*releaseMaxBody/2 {
		t.Errorf("20000 scattered releases in %d bytes: want several frames", len(b))
	}
}

// FuzzScan checks that a segment of any bytes scans, frames and
// releases, without a panic and without reading past its end.
func FuzzScan(f *testing.F) {
	seg := appendHeader(nil, 1, 7, false)
	seg = appendFrame(seg, 7, typeData, nil, []byte("hello"))
	seg = appendMoved(seg, 7, 0, []byte("moved"))
	seg = appendReleases(seg, 7, []uint64{1})
	f.Add(seg, 0, byte(0))
	f.Add(seg, 30, byte(0xff))
	f.Fuzz(func(t *testing.T, b []byte, at int, x byte) {
		if at >= 0 && at < len(b) {
			b = slices.Clone(b)
			b[at] ^= x
		}
		if len(b) < headerSize {
			return
		}
		sc := newScanner(bytes.NewReader(b), 7, headerSize, int64(len(b)))
		for range len(b) {
			fr, err := sc.next()
			if err != nil {
				return
			}
			if sc.off > int64(len(b)) {
				t.Fatalf("scanned to %d of %d bytes", sc.off, len(b))
			}
			if fr.typ == typeRelease {
				_ = parseReleases(fr.body, 1<<20, func(uint64) {})
			}
		}
	})
}
