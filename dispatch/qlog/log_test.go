package qlog

import (
	"context"
	"errors"
	"testing"
)

func TestLog_Append_replaysAfterReopen(t *testing.T) {
	cfg, warns := testConfig(t)
	l, got := openLog(t, cfg, hooks{})
	if len(got) != 0 {
		t.Fatalf("a new log replayed %d records", len(got))
	}
	want := map[uint64]string{}
	next := uint64(1)
	for i := 0; i < 200; {
		n := 1 + i%7
		var recs [][]byte
		for j := range n {
			recs = append(recs, rec(i+j, 50+(i+j)%200))
		}
		seq := mustAppend(t, l, recs...)
		if seq != next {
			t.Fatalf("append %d: seq %d, want %d", i, seq, next)
		}
		for j, r := range recs {
			want[seq+uint64(j)] = string(r)
		}
		next += uint64(n)
		i += n
	}
	if s := l.Stats(); s.Segments < 3 || s.Appended != uint64(len(want)) || s.Live != len(want) {
		t.Errorf("stats %+v, want 3 segments or more, %d appended and live", s, len(want))
	}
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
}

func TestLog_Append_emptyAndTooLarge(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.MaxRecordBytes = 100
	l, _ := openLog(t, cfg, hooks{})
	if seq, err := l.Append(context.Background()); seq != 0 || err != nil {
		t.Errorf("empty append: %d, %v; want 0, nil", seq, err)
	}
	if _, err := l.Append(context.Background(), rec(1, 50), rec(2, 101)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("append of 101 bytes: %v, want ErrTooLarge", err)
	}
	if seq := mustAppend(t, l, rec(3, 100)); seq != 1 {
		t.Errorf("seq %d after a refused append, want 1", seq)
	}
}
