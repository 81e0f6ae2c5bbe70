package chtest

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// claimsPair opens two claim sets, as two Servers (in one process or two)
// hold them.
func claimsPair(t *testing.T) (a, b *portClaims) {
	t.Helper()
	var err error
	if a, err = openPortClaims(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	if b, err = openPortClaims(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.close() })
	return a, b
}

func TestPortClaims_heldUntilReleased(t *testing.T) {
	a, b := claimsPair(t)
	got, err := pickPorts(1, a, nil, listenLoopback)
	if err != nil {
		t.Fatal(err)
	}
	p := got[0]
	for _, step := range []struct {
		name string
		c    *portClaims
		want bool
	}{
		{"the other claims a held port", b, false},
		{"the holder claims it again", a, true},
		{"the other claims it again", b, false},
	} {
		if ok, err := step.c.claim(p); err != nil || ok != step.want {
			t.Fatalf("%s: got %v, %v; want %v", step.name, ok, err, step.want)
		}
	}
	if err := a.release(p); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.claim(p); err != nil || !ok {
		t.Fatalf("claim after release: got %v, %v; want true", ok, err)
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.claim(p); err != nil || !ok {
		t.Fatalf("claim after the holder closed: got %v, %v; want true", ok, err)
	}
}

// listenFirst returns a listen function for pickPorts that listens on
// port first, as the kernel may hand out a stopped server's port, then on
// ports of the kernel's choice.
func listenFirst(port int) func() (net.Listener, error) {
	first := true
	return func() (net.Listener, error) {
		if first {
			first = false
			return net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		return listenLoopback()
	}
}

func TestPickPorts_passesOverClaimedPorts(t *testing.T) {
	a, b := claimsPair(t)
	held, err := pickPorts(1, a, nil, listenLoopback)
	if err != nil {
		t.Fatal(err)
	}
	p := held[0] // claimed by a and free, as a stopped server's port is

	got, err := pickPorts(2, b, nil, listenFirst(p))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] == got[1] || slices.Contains(got, p) {
		t.Fatalf("pickPorts: got %v, want two distinct ports without %d, which another Server claimed", got, p)
	}
	for _, port := range got {
		if ok, err := a.claim(port); err != nil || ok {
			t.Fatalf("claim of picked port %d by another: got %v, %v; want false", port, ok, err)
		}
	}

	got, err = pickPorts(1, a, func(port int) bool { return port == p }, listenFirst(p))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == p {
		t.Fatalf("pickPorts with %d skipped: got it", p)
	}
}

// fixedListener is a listener that only reports its address, for a
// kernel that keeps handing out one port.
type fixedListener struct{ addr *net.TCPAddr }

func (l fixedListener) Accept() (net.Conn, error) { return nil, errors.New("not listening") }
func (l fixedListener) Close() error              { return nil }
func (l fixedListener) Addr() net.Addr            { return l.addr }

func TestPickPorts_boundedWhenEveryPortIsClaimed(t *testing.T) {
	a, b := claimsPair(t)
	held, err := pickPorts(2, a, nil, listenLoopback)
	if err != nil {
		t.Fatal(err)
	}
	calls, first := 0, 0
	listen := func() (net.Listener, error) {
		calls++
		if calls == 1 {
			l, err := listenLoopback() // a free port, claimed, then given back
			if err == nil {
				first = l.Addr().(*net.TCPAddr).Port
			}
			return l, err
		}
		return fixedListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: held[0]}}, nil
	}
	got, err := pickPorts(2, b, nil, listen)
	if err == nil || !strings.Contains(err.Error(), "unclaimed") {
		t.Fatalf("pickPorts: got %v, %v; want an error after %d picks", got, err, maxPortPicks)
	}
	if calls != maxPortPicks {
		t.Fatalf("listen calls: got %d, want %d", calls, maxPortPicks)
	}
	if ok, err := a.claim(first); err != nil || !ok {
		t.Fatalf("claim of %d, which the failed pick had claimed: got %v, %v; want it given back", first, ok, err)
	}
}
