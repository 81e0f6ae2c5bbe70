package main

import (
	"slices"
	"testing"
)

func TestReadiness_missing(t *testing.T) {
	type state struct{ serving, stopped, self, joined, caughtUp bool }
	tests := []struct {
		name string
		s    state
		want []string
	}{
		{"ready after joining and pulling", state{serving: true, joined: true, caughtUp: true}, nil},
		{"alone without seeds, leading", state{serving: true, self: true, caughtUp: true}, nil},
		{"alone without seeds, no leader yet", state{serving: true, self: true}, []string{"key space not caught up"}},
		{"seed not answered yet", state{serving: true}, []string{"gossip not joined", "key space not caught up"}},
		{"joined, pull not finished", state{serving: true, joined: true}, []string{"key space not caught up"}},
		{"etcd API not serving", state{joined: true, caughtUp: true}, []string{"etcd API not serving"}},
		{"gossip stopped", state{serving: true, stopped: true, self: true, caughtUp: true}, []string{"gossip stopped"}},
		{"nothing", state{stopped: true}, []string{"etcd API not serving", "gossip stopped", "gossip not joined", "key space not caught up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			r := &readiness{
				serving:    func() bool { return s.serving },
				stopped:    func() bool { return s.stopped },
				selfSeeded: func() bool { return s.self },
				joined:     func() bool { return s.joined },
				caughtUp:   func() bool { return s.caughtUp },
			}
			if got := r.missing(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			r.leaving.Store(true)
			if got := r.missing(); len(got) == 0 || got[0] != "shutting down" {
				t.Errorf("leaving: got %q, want \"shutting down\" first", got)
			}
		})
	}
}

// TestReadiness_missing_syncOnce checks that joined and caught up are
// start conditions: once they held, losing the peers does not make the
// node unready, while the etcd API stopping does.
func TestReadiness_missing_syncOnce(t *testing.T) {
	serving, joined, caughtUp := true, false, false
	r := &readiness{
		serving:    func() bool { return serving },
		stopped:    func() bool { return false },
		selfSeeded: func() bool { return false },
		joined:     func() bool { return joined },
		caughtUp:   func() bool { return caughtUp },
	}
	if got := r.missing(); len(got) != 2 {
		t.Fatalf("before joining: got %q, want two reasons", got)
	}
	joined = true
	if got, want := r.missing(), []string{"key space not caught up"}; !slices.Equal(got, want) {
		t.Fatalf("joined: got %q, want %q", got, want)
	}
	caughtUp = true
	if got := r.missing(); got != nil {
		t.Fatalf("joined and caught up: got %q, want ready", got)
	}
	joined, caughtUp = false, false
	if got := r.missing(); got != nil {
		t.Fatalf("peers gone after the start: got %q, want ready", got)
	}
	serving = false
	if got, want := r.missing(), []string{"etcd API not serving"}; !slices.Equal(got, want) {
		t.Fatalf("etcd API stopped: got %q, want %q", got, want)
	}
}

func TestReason(t *testing.T) {
	got := reason([]string{"gossip not joined", "key space not caught up"})
	if want := "not ready: gossip not joined; key space not caught up\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
