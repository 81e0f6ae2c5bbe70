package bench

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

// fakeChildEnv makes the test binary act as a matrix child: `noop-server
// ...` runs Main as chute-bench would, anything else is a fake chute node (fakeNode) that serves the etcd
// KV API on its --listen-client-urls and /status and /metrics on its
// --metrics-listen, inserts its queues' rows into --clickhouse-url
// (compressed as --clickhouse-compression says: none, gzip or deflate), and
// traces like chute: with OTEL_EXPORTER_OTLP_ENDPOINT set (and
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, the only protocol it speaks), one
// server span per call, exported within 50 ms. --join,
// --gossip-profile and --bootstrap-expect are accepted and ignored: a fake
// node always sees three members alive and is ready. --data-dir is
// created, as chute does.
const fakeChildEnv = "CHUTE_BENCH_FAKE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeChildEnv) == "1" {
		os.Exit(fakeChild(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

func fakeChild(args []string) int {
	if len(args) > 0 && args[0] == NoopServerCommand {
		return Main(args, os.Stdout, os.Stderr)
	}
	if slices.Contains(args, "--initial-cluster-state") {
		return fakeEtcd(args)
	}
	fs := flag.NewFlagSet("fake chute", flag.ContinueOnError)
	var name, client, peer, gossip, metrics, level, join, profile, clickhouse, compression, dataDir, expect string
	fail := fs.Bool("fail", false, "exit 3 at once")
	ignoreOTel := fs.Bool("ignore-otel", false, "never trace, whatever the environment says")
	noFsync := fs.Bool("unsafe-no-fsync", false, "count no fsync")
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&client, "listen-client-urls", "", "")
	fs.StringVar(&peer, "listen-peer-urls", "", "")
	fs.StringVar(&gossip, "gossip-listen", "", "")
	fs.StringVar(&metrics, "metrics-listen", "", "")
	fs.StringVar(&level, "log-level", "", "")
	fs.StringVar(&join, "join", "", "")
	fs.StringVar(&profile, "gossip-profile", "", "")
	fs.StringVar(&clickhouse, "clickhouse-url", "", "")
	fs.StringVar(&compression, "clickhouse-compression", "none", "")
	fs.StringVar(&dataDir, "data-dir", "", "")
	fs.StringVar(&expect, "bootstrap-expect", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, v := range []string{name, client, peer, gossip, metrics, level, dataDir} {
		if v == "" {
			return 2
		}
	}
	if *fail {
		return 3
	}
	switch compression {
	case "none", "gzip", "deflate":
	default:
		return 2
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	getenv := os.Getenv
	if *ignoreOTel {
		getenv = func(string) string { return "" }
	}
	node := newFakeNode(name, clickhouse)
	node.noFsync = *noFsync
	node.compression = compression
	srv, shutdown, err := fakeChuteServer(ctx, getenv, node)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake chute: %v\n", err)
		return 2
	}
	l, err := net.Listen("tcp", strings.TrimPrefix(client, "http://"))
	if err != nil {
		return 1
	}
	ml, err := net.Listen("tcp", metrics)
	if err != nil {
		return 1
	}
	go node.serveMetrics(ctx, ml)
	if clickhouse != "" {
		go node.flushLoop(ctx)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	<-ctx.Done()
	srv.Stop()
	<-served
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		return 1
	}
	return 0
}

// fakeEtcd is a fake etcd member: it takes etcd's flags as etcdCommand
// writes them, creates --data-dir and serves a fakeNode's KV (plain keys
// accepted and forgotten) on --listen-client-urls until SIGTERM.
func fakeEtcd(args []string) int {
	fs := flag.NewFlagSet("fake etcd", flag.ContinueOnError)
	var name, dataDir, client, state string
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&dataDir, "data-dir", "", "")
	fs.StringVar(&client, "listen-client-urls", "", "")
	fs.StringVar(&state, "initial-cluster-state", "", "")
	for _, f := range []string{"advertise-client-urls", "listen-peer-urls", "initial-advertise-peer-urls",
		"initial-cluster", "initial-cluster-token", "logger", "log-level"} {
		fs.String(f, "", "")
	}
	if err := fs.Parse(args); err != nil || name == "" || dataDir == "" || state != "new" {
		return 2
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, newFakeNode(name, ""))
	l, err := net.Listen("tcp", strings.TrimPrefix(client, "http://"))
	if err != nil {
		return 1
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	<-ctx.Done()
	srv.Stop()
	<-served
	return 0
}

// fakeChuteServer is the fake chute node's gRPC server: kv's API, traced
// when getenv names an OTLP endpoint. shutdown flushes the spans.
func fakeChuteServer(ctx context.Context, getenv func(string) string, kv pb.KVServer) (srv *grpc.Server, shutdown func(context.Context) error, err error) {
	shutdown = func(context.Context) error { return nil }
	var opts []grpc.ServerOption
	if ep := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); ep != "" {
		if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "grpc" {
			return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q, want grpc", p)
		}
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(ep))
		if err != nil {
			return nil, nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)))
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))))
		shutdown = tp.Shutdown
	}
	srv = grpc.NewServer(opts...)
	pb.RegisterKVServer(srv, kv)
	pb.RegisterMaintenanceServer(srv, noopMaintenance{})
	return srv, shutdown, nil
}

// startNoop serves a NoopServer on a random loopback port until the test
// ends and returns its address.
func startNoop(t *testing.T) string {
	t.Helper()
	return startDelayedNoop(t, NoopDelays{})
}

// startDelayedNoop is startNoop for a NoopServer that holds its answers.
func startDelayedNoop(t *testing.T, d NoopDelays) string {
	t.Helper()
	return serveNoop(t, d, nil)
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// startCountedNoop is startNoop counting the connections it accepts in
// accepted.
func startCountedNoop(t *testing.T, accepted *atomic.Int64) string {
	t.Helper()
	return serveNoop(t, NoopDelays{}, accepted)
}

// serveNoop serves a NoopServer on a loopback port until the test ends
// and returns its address; with accepted, counting the connections it
// accepts there.
func serveNoop(t *testing.T, d NoopDelays, accepted *atomic.Int64) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if accepted != nil {
		l = countingListener{Listener: l, accepted: accepted}
	}
	srv := NewNoopServer(d)
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

// smallConfig is a quick run against endpoint.
func smallConfig(endpoint string) Config {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{endpoint}
	cfg.Clients = 4
	cfg.Conns = 3 // one or more for each of three endpoints
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
