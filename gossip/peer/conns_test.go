package peer

import (
	"errors"
	"testing"
)

// TestConns_oneConnectionPerAddress checks Get dials once per address and
// fails after Close.
func TestConns_oneConnectionPerAddress(t *testing.T) {
	c := NewConns()
	a1, err := c.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Get("127.0.0.1:1")
	b, _ := c.Get("127.0.0.1:2")
	if a1 != a2 || a1 == b {
		t.Fatalf("connections: same address %p %p, other address %p; want one per address", a1, a2, b)
	}
	c.Close()
	c.Close()
	if _, err := c.Get("127.0.0.1:1"); !errors.Is(err, ErrConnsClosed) {
		t.Fatalf("Get after Close: %v, want ErrConnsClosed", err)
	}
}
