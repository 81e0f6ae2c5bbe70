package kv

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestHealth_check: gRPC's health service answers as etcd's does: the
// service name "" is SERVING, any other name is NotFound, and List
// names "" alone.
func TestHealth_check(t *testing.T) {
	_, cli := startServer(t, nil)
	h := healthpb.NewHealthClient(cli.ActiveConnection())
	ctx := testCtx(t, 10*time.Second)
	r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check(\"\") = %v, %v; want SERVING", r, err)
	}
	_, err = h.Check(ctx, &healthpb.HealthCheckRequest{Service: "etcdserverpb.KV"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check(etcdserverpb.KV) = %v; want NotFound, as etcd", err)
	}
	l, err := h.List(ctx, &healthpb.HealthListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Statuses) != 1 || l.Statuses[""].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("List = %v; want \"\" SERVING alone", l.Statuses)
	}
}

// TestHealth_followsReadyAndShutdown: the status follows Config.Ready,
// a Watch sees it change, and a shutdown sends the Watch NOT_SERVING,
// ends it, and does not wait for its client to go.
func TestHealth_followsReadyAndShutdown(t *testing.T) {
	var ready atomic.Bool
	srv, cli := startServer(t, func(c *Config) { c.Ready = ready.Load })
	h := healthpb.NewHealthClient(cli.ActiveConnection())
	ctx := testCtx(t, 20*time.Second)
	r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check while not ready = %v, %v; want NOT_SERVING", r, err)
	}
	w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := w.Recv()
		if err != nil || r.Status != want {
			t.Fatalf("Watch got %v, %v; want %v", r, err, want)
		}
	}
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	ready.Store(true)
	next(healthpb.HealthCheckResponse_SERVING) // within healthWatchEvery
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check once ready = %v, %v; want SERVING", r, err)
	}

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a health Watch open: it waited for the stream", d)
	}
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	if _, err := w.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Watch after NOT_SERVING: %v; want its end (EOF)", err)
	}
}

// TestHealth_noUserNeeded: with auth enabled, a client without a user
// checks and watches the health, as in etcd; a KV call without one is
// still refused.
func TestHealth_noUserNeeded(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	enableAuth(t, cli)
	anon := newClient(t, srv)
	ctx := testCtx(t, 10*time.Second)
	if _, err := anon.Get(ctx, "k"); err == nil {
		t.Fatal("Get without a user succeeded with auth enabled")
	}
	h := healthpb.NewHealthClient(anon.ActiveConnection())
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check without a user = %v, %v; want SERVING", r, err)
	}
	w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch without a user = %v, %v; want SERVING", r, err)
	}
}
