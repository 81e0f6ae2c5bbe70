package raftkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// commandsOf returns the commands eachCommand finds in data, copied.
func commandsOf(data []byte) ([]string, error) {
	var out []string
	err := eachCommand(data, func(cmd []byte) { out = append(out, string(cmd)) })
	return out, err
}

// TestPack_roundTrip checks an entry of one command is the command
// itself and an entry of several gives them back in order, the empty
// and the long ones too.
func TestPack_roundTrip(t *testing.T) {
	one := packEntry([][]byte{[]byte("\x0aonly")})
	if string(one) != "\x0aonly" {
		t.Fatalf("one command packed as %q, want the command itself", one)
	}
	long := string(bytes.Repeat([]byte("x"), 300)) // a two-byte length
	cmds := []string{"\x0aa", "", long, "\x22b"}
	in := make([][]byte, len(cmds))
	for i, c := range cmds {
		in[i] = []byte(c)
	}
	entry := packEntry(in)
	if entry[0] != packMarker || len(entry) != packedSize(in) {
		t.Fatalf("packed entry starts %#x, %d bytes; want the marker, %d bytes", entry[0], len(entry), packedSize(in))
	}
	got, err := commandsOf(entry)
	if err != nil || !slices.Equal(got, cmds) {
		t.Fatalf("unpacked %q, %v; want %q", got, err, cmds)
	}
	if got, err := commandsOf(one); err != nil || !slices.Equal(got, []string{"\x0aonly"}) {
		t.Fatalf("unpacked one command as %q, %v", got, err)
	}
}

// TestPack_damaged checks a packed entry cut short or with a length past
// its end gives the commands before the damage and errBadPack.
func TestPack_damaged(t *testing.T) {
	entry := packEntry([][]byte{[]byte("\x0afirst"), []byte("\x0asecond")})
	for name, data := range map[string][]byte{
		"cut":       entry[:len(entry)-2],
		"long":      append(slices.Clone(entry[:8]), 0x7f, 'x'),
		"no length": append(slices.Clone(entry[:8]), 0x80),
	} {
		got, err := commandsOf(data)
		if !errors.Is(err, errBadPack) || !slices.Equal(got, []string{"\x0afirst"}) {
			t.Errorf("%s: unpacked %q, %v; want the first command and errBadPack", name, got, err)
		}
	}
}

// TestFSM_Apply_packed checks each command of a packed entry reaches the
// state machine at the entry's index, and a packed entry with no whole
// command still counts as applied.
func TestFSM_Apply_packed(t *testing.T) {
	sm := newTestSM()
	f := NewFSM(sm)
	f.Apply(&raft.Log{Index: 3, Term: 2, Type: raft.LogCommand, Data: packEntry([][]byte{[]byte("a"), []byte("b")})})
	want := []entry{{Index: 3, Term: 2, Cmd: "a"}, {Index: 3, Term: 2, Cmd: "b"}}
	if !slices.Equal(sm.entries, want) || sm.Applied() != 3 {
		t.Fatalf("applied %v up to %d, want %v up to 3", sm.entries, sm.Applied(), want)
	}
	f.Apply(&raft.Log{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte{packMarker, 0x05, 'x'}})
	if len(sm.entries) != 2 || sm.Applied() != 4 {
		t.Fatalf("a damaged entry: applied %v up to %d, want nothing more, up to 4", sm.entries, sm.Applied())
	}
}

// TestConsensus_Propose_packed proposes many commands on the leader
// while its state machine holds an entry back: the commands that
// waited share entries, every one is applied once, and one whose caller
// left before it reached an entry is never applied. The leader is alone:
// in a cluster of three, a stall of make test's load past the lease
// ended its leadership while its first commands waited (CI, stop 53),
// and packing is the leader's alone.
func TestConsensus_Propose_packed(t *testing.T) {
	leader := startMember(t, "m1", nil)
	if err := leader.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: leader.id, Address: raft.ServerAddress(leader.addr)}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, leader)
	release := leader.sm.hold()
	defer release()
	queue := &leader.c.applies
	state := func() (running, pending int) {
		queue.mu.Lock()
		defer queue.mu.Unlock()
		return queue.running, len(queue.pending)
	}
	// Every applier gets an entry of its own that the held state
	// machine does not apply, so the commands after them wait.
	var wg sync.WaitGroup
	for i := range maxEntriesInFlight {
		wg.Go(func() {
			if err := leader.c.Propose(testCtx(t), fmt.Appendf(nil, "first-%d", i)); err != nil {
				t.Error(err)
			}
		})
		waitFor(t, "an applier for each first command", func() bool {
			running, pending := state()
			return running == i+1 && pending == 0
		})
	}
	const n = 100
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = leader.c.Propose(testCtx(t), fmt.Appendf(nil, "packed-%03d", i)) })
	}
	waitFor(t, "the commands waiting", func() bool {
		_, pending := state()
		return pending == n
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	if err := leader.c.Propose(ctx, []byte("left")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("propose of a caller that left: %v, want its deadline", err)
	}
	release()
	wg.Wait()
	indexes := map[uint64]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("packed-%03d: %v", i, err)
		}
		indexes[leader.sm.indexOf(fmt.Sprintf("packed-%03d", i))] = true
	}
	if len(indexes) >= n {
		t.Errorf("%d commands in %d entries, want fewer", n, len(indexes))
	} else {
		t.Logf("%d commands in %d entries", n, len(indexes))
	}
	if err := leader.c.Propose(testCtx(t), []byte("settle")); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range leader.sm.cmds() {
		count[c]++
	}
	for i := range n {
		if c := count[fmt.Sprintf("packed-%03d", i)]; c != 1 {
			t.Errorf("packed-%03d applied %d times, want once", i, c)
		}
	}
	if count["left"] != 0 {
		t.Errorf("the command whose caller left was applied %d times, want never", count["left"])
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within 10s", what)
}
