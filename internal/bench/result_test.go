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
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // reversed
	}
	tests := []struct {
		name     string
		lat      []time.Duration
		p50, p99 time.Duration
	}{
		{"empty", nil, 0, 0},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(9, 1), 1 * time.Millisecond, 9 * time.Millisecond},
		{"hundred", hundred, 50 * time.Millisecond, 99 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p50, p99 := percentiles(tt.lat)
			if p50 != tt.p50 || p99 != tt.p99 {
				t.Errorf("got p50 %v p99 %v, want %v %v", p50, p99, tt.p50, tt.p99)
			}
		})
	}
}
