package faults

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// proxyGet sends GET / through the proxy on a fresh connection, as chute
// does, and returns the body.
func proxyGet(p *Proxy, timeout time.Duration) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: timeout}
	resp, err := c.Get(p.URL() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "Ok.\n") }))
	defer srv.Close()
	p, err := NewProxy(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	if body, err := proxyGet(p, 5*time.Second); err != nil || body != "Ok.\n" {
		t.Fatalf("forward: got %q, %v", body, err)
	}

	p.SetLatency(300 * time.Millisecond)
	start := time.Now()
	if body, err := proxyGet(p, 5*time.Second); err != nil || body != "Ok.\n" {
		t.Fatalf("forward with latency: got %q, %v", body, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("a request with 300ms of latency took %v", took)
	}
	p.SetLatency(0)

	p.SetMode(Refuse)
	start = time.Now()
	if body, err := proxyGet(p, 5*time.Second); err == nil {
		t.Errorf("refuse: got %q, want an error", body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a refused request took %v, want it at once", took)
	}

	p.SetMode(Hold)
	if body, err := proxyGet(p, 300*time.Millisecond); err == nil {
		t.Errorf("hold: got %q, want a timeout", body)
	}
	// A held request goes through once the proxy forwards again.
	done := make(chan error, 1)
	go func() {
		_, err := proxyGet(p, 10*time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a held request ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	p.SetMode(Forward)
	if err := <-done; err != nil {
		t.Errorf("a held request after SetMode(Forward): %v", err)
	}

	// Cut and Close end held connections.
	p.SetMode(Hold)
	go func() {
		_, err := proxyGet(p, 10*time.Second)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it be accepted; Cut may come first, which it survives only until Close
	p.Cut()
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
	if err := <-done; err == nil {
		t.Error("a request held through Close: got nil error")
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestProxy_targetDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	p, err := NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if body, err := proxyGet(p, 5*time.Second); err == nil {
		t.Errorf("forward to a closed port: got %q, want an error", body)
	}
}
