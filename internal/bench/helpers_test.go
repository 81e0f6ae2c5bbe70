package bench

import (
	"context"
	"flag"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeChildEnv makes the test binary act as a matrix child: `bench ...` runs
// Main, anything else is a fake chute node that serves the no-op API on its
// --listen-client-urls.
const fakeChildEnv = "CHUTE_BENCH_FAKE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeChildEnv) == "1" {
		os.Exit(fakeChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeChild(args []string) int {
	if len(args) > 0 && args[0] == "bench" {
		return Main(args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("fake chute", flag.ContinueOnError)
	var name, client, peer, gossip, metrics, level string
	fail := fs.Bool("fail", false, "exit 3 at once")
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&client, "listen-client-urls", "", "")
	fs.StringVar(&peer, "listen-peer-urls", "", "")
	fs.StringVar(&gossip, "gossip-listen", "", "")
	fs.StringVar(&metrics, "metrics-listen", "", "")
	fs.StringVar(&level, "log-level", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, v := range []string{name, client, peer, gossip, metrics, level} {
		if v == "" {
			return 2
		}
	}
	if *fail {
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", strings.TrimPrefix(client, "http://"))
	if err != nil {
		return 1
	}
	srv := NewNoopServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	<-ctx.Done()
	srv.Stop()
	<-served
	return 0
}

// startNoop serves a NoopServer on a random loopback port until the test
// ends and returns its address.
func startNoop(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := NewNoopServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: got %v, want nil after Stop", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return within 5s of Stop")
		}
	})
	return l.Addr().String()
}

// refusedAddr returns a loopback address nothing listens on any more.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return addr
}

// smallConfig is a quick run against endpoint.
func smallConfig(endpoint string) Config {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{endpoint}
	cfg.Clients = 4
	cfg.Conns = 2
	cfg.Puts = 2000
	cfg.Warmup = 50
	cfg.KeyPrefix = "bench/test/"
	cfg.DialTimeout = 2 * time.Second
	cfg.PutTimeout = 2 * time.Second
	return cfg
}

// testContext is bounded so that no test can hang.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
