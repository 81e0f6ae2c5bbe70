package kv

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
)

// metaOf returns key's replication state, zero when there is none.
func metaOf(s *Server, key string) keyMeta {
	s.store.mu.RLock()
	defer s.store.mu.RUnlock()
	if m := s.store.metas[key]; m != nil {
		return *m
	}
	return keyMeta{}
}

func clockOf(s *Server) uint64 {
	s.store.mu.RLock()
	defer s.store.mu.RUnlock()
	return s.store.clock
}

func TestServer_ApplyRemote_stampFarAheadRefused(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := t.Context()
	if _, err := cli.Put(ctx, "k", "acked"); err != nil {
		t.Fatal(err)
	}
	before := clockOf(srv)
	n, err := srv.ApplyRemote([]*peerpb.Write{
		{Key: []byte("k"), Value: []byte("evil"), Lamport: math.MaxUint64, Member: 1},
		{Key: []byte("other"), Value: []byte("fine"), Lamport: before + 1, Member: 1},
	})
	if !errors.Is(err, ErrStampAhead) || status.Code(err) != codes.OutOfRange {
		t.Fatalf("got %v (code %v), want ErrStampAhead with OutOfRange", err, status.Code(err))
	}
	if n != 1 {
		t.Fatalf("got %d applied, want 1: the plausible write of the batch", n)
	}
	if got := clockOf(srv); got != before+1 {
		t.Fatalf("clock: got %d, want %d: a refused stamp must not be adopted", got, before+1)
	}
	if _, err := cli.Put(ctx, "k", "later"); err != nil {
		t.Fatal(err)
	}
	if got := string(srv.Get("k")); got != "later" {
		t.Fatalf("k: got %q, want %q", got, "later")
	}
	if got := metaOf(srv, "k").stamp.time; got <= before+1 {
		t.Fatalf("stamp of the later write: got %d, want above %d", got, before+1)
	}
}

func TestServer_ApplyRemote_stampWithinLeadAdopted(t *testing.T) {
	srv, _ := startServer(t, nil)
	ref := max(clockOf(srv), wallStamp(time.Now()))
	ahead := ref + MaxStampLead/2
	if _, err := srv.ApplyRemote([]*peerpb.Write{{Key: []byte("k"), Value: []byte("v"), Lamport: ahead, Member: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := clockOf(srv); got != ahead {
		t.Fatalf("clock: got %d, want %d", got, ahead)
	}
}

func TestServer_ApplyRemote_sizeLimits(t *testing.T) {
	srv, _ := startServer(t, func(c *Config) { c.MaxKeyBytes, c.MaxRequestBytes = 16, 1024 })
	stamp := clockOf(srv) + 1
	for _, tc := range []struct {
		name string
		w    *peerpb.Write
		want error
	}{
		{"key", &peerpb.Write{Key: []byte(strings.Repeat("k", 16+deadLetterKeyExtra+1)), Lamport: stamp, Member: 1}, ErrKeyTooLarge},
		{"value", &peerpb.Write{Key: []byte("k"), Value: make([]byte, 1024*remoteValueFactor+1), Lamport: stamp, Member: 1}, ErrRequestTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := srv.ApplyRemote([]*peerpb.Write{tc.w})
			if !errors.Is(err, tc.want) || status.Code(err) != codes.InvalidArgument || n != 0 {
				t.Fatalf("got %d applied, %v (code %v); want 0, %v with InvalidArgument", n, err, status.Code(err), tc.want)
			}
		})
	}
}

func TestStore_clockAtTopDoesNotWrap(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := t.Context()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	srv.store.mu.Lock()
	srv.store.clock = math.MaxUint64 - 1
	srv.store.mu.Unlock()
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("the last stamp: %v", err)
	}
	if got := metaOf(srv, "k").stamp.time; got != math.MaxUint64 {
		t.Fatalf("stamp: got %d, want %d", got, uint64(math.MaxUint64))
	}
	_, err := cli.Put(ctx, "k", "v3")
	if status.Code(err) != codes.OutOfRange || !strings.Contains(err.Error(), "lamport clock exhausted") {
		t.Fatalf("past the last stamp: got %v, want OutOfRange \"lamport clock exhausted\"", err)
	}
	if _, err := cli.Delete(ctx, "k"); status.Code(err) != codes.OutOfRange {
		t.Fatalf("delete past the last stamp: got %v, want OutOfRange", err)
	}
	if _, err := cli.Txn(ctx).Then().Commit(); status.Code(err) != codes.OutOfRange {
		t.Fatalf("txn past the last stamp: got %v, want OutOfRange", err)
	}
	if ok, _ := srv.CompareAndPut(ctx, "k", []byte("v2"), []byte("v4")); ok {
		t.Fatal("CompareAndPut wrote past the last stamp")
	}
	if got := clockOf(srv); got != math.MaxUint64 {
		t.Fatalf("clock: got %d, want it kept at %d", got, uint64(math.MaxUint64))
	}
	if got := string(srv.Get("k")); got != "v2" {
		t.Fatalf("k: got %q, want %q", got, "v2")
	}
}

func TestNextStamp(t *testing.T) {
	now := time.UnixMicro(1_000_000)
	for _, tc := range []struct {
		clock, want uint64
	}{
		{0, 1_000_000},
		{999_999, 1_000_000},
		{1_000_000, 1_000_001},
		{5_000_000, 5_000_001},
		{math.MaxUint64 - 1, math.MaxUint64},
	} {
		if got := nextStamp(tc.clock, now); got != tc.want {
			t.Errorf("nextStamp(%d): got %d, want %d", tc.clock, got, tc.want)
		}
	}
	if got := wallStamp(time.Time{}); got != 0 {
		t.Errorf("wallStamp(zero time): got %d, want 0", got)
	}
}
