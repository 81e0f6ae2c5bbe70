package bench

import (
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(1000-i) * time.Millisecond // reversed
	}
	tests := []struct {
		name           string
		lat            []time.Duration
		p50, p99, p999 time.Duration
	}{
		{"empty", nil, 0, 0, 0},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(9, 1), 1 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond},
		{"thousand", thousand, 500 * time.Millisecond, 990 * time.Millisecond, 999 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p50, p99, p999 := percentiles(tt.lat)
			if p50 != tt.p50 || p99 != tt.p99 || p999 != tt.p999 {
				t.Errorf("got p50 %v p99 %v p99.9 %v, want %v %v %v", p50, p99, p999, tt.p50, tt.p99, tt.p999)
			}
		})
	}
}

func TestWeightedPercentiles(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name           string
		ws             []weighted
		p50, p99, p999 time.Duration
	}{
		{"empty", nil, 0, 0, 0},
		{"no rows", []weighted{{5 * ms, 0}}, 0, 0, 0},
		// 990 rows at 10 ms, 9 at 50 ms, 1 at 300 ms: the weights, not the
		// entries, decide.
		{"weighted", []weighted{{300 * ms, 1}, {50 * ms, 9}, {10 * ms, 990}}, 10 * ms, 10 * ms, 50 * ms},
		{"even", []weighted{{2 * ms, 1}, {1 * ms, 1}}, 1 * ms, 2 * ms, 2 * ms},
		{"tail", []weighted{{1 * ms, 980}, {80 * ms, 20}}, 1 * ms, 80 * ms, 80 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p50, p99, p999 := weightedPercentiles(tt.ws)
			if p50 != tt.p50 || p99 != tt.p99 || p999 != tt.p999 {
				t.Errorf("got p50 %v p99 %v p99.9 %v, want %v %v %v", p50, p99, p999, tt.p50, tt.p99, tt.p999)
			}
		})
	}
}
