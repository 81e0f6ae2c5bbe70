package kv

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// startServer starts a server on a free loopback port with test timings,
// after mutate (if any) changes its config, and returns it with a client.
// Both are stopped when the test ends.
func startServer(t testing.TB, mutate func(*Config)) (*Server, *clientv3.Client) {
	t.Helper()
	return startServerWith(t, mutate, nil)
}

// startServerWith is startServer with before (if any) called between New
// and Start.
func startServerWith(t testing.TB, mutate func(*Config), before func(*Server)) (*Server, *clientv3.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name = "test"
	cfg.ClusterID = 0x1234
	cfg.MemberID = 0xabcd
	cfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	cfg.MinLeaseTTL = 1
	cfg.WatchSyncInterval = 10 * time.Millisecond
	if os.Getenv("CHUTE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if before != nil {
		before(srv)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv, newClient(t, srv)
}

// newClient returns a clientv3 client of srv, closed when the test ends.
func newClient(t testing.TB, srv *Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.ClientAddrs()[0].String()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// testCtx returns a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// watcherCount returns how many watchers srv's store has registered.
func watcherCount(srv *Server) int {
	synced, unsynced := srv.store.Watchers()
	return synced + unsynced
}
