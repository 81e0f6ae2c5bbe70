package faults

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestProxy_Records(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(c).ReadString('\n')
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			_ = c.Close()
		}
	}()
	p, err := NewProxy(target.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := io.WriteString(c, "POST /?query=INSERT HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(c)
	_ = c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Records()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	recs := p.Records()
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	r := recs[0]
	if r.Head != "POST /?query=INSERT HTTP/1.1" || r.Remote != c.LocalAddr().String() || r.End.Before(r.Start) || r.Start.Before(before.Add(-time.Second)) {
		t.Errorf("got %+v, want the request line, the client's address %s and ordered times", r, c.LocalAddr())
	}
	if strings.Contains(r.Head, "\r") {
		t.Errorf("head %q keeps the line end", r.Head)
	}
}

func TestHeadWriter_keepsMax(t *testing.T) {
	h := &headWriter{max: 4}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := h.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q): %d, %v", s, n, err)
		}
	}
	if got := h.line(); got != "abcd" {
		t.Errorf("got %q, want %q", got, "abcd")
	}
}
