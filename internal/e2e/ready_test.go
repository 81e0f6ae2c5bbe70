//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// joinAfterSeed bounds the time from a seed being ready to a node that
// kept trying it having joined: its next join round, at most a second
// after the last with the fast profile (cmd/chute's JoinBackoffMax),
// and a second more for a loaded machine. Once joined, the node is added
// to raft and catches up as any starting node does, which the harness
// gives readyTimeout.
const joinAfterSeed = 2 * time.Second

// getReadyz returns the status code and body of p's GET /readyz.
func getReadyz(p *Proc) (int, string, error) {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + p.MetricsAddr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(body), err
}

// startServing starts the node planned as pl like start, but returns once
// its etcd API serves, ready or not: for a node whose seeds are not up
// yet, or never let it in. Restarts of it wait for the same.
func (c *cluster) startServing(pl nodePlan, extra ...string) *Proc {
	c.t.Helper()
	p, err := launchChute(c.t, c.args(pl, extra...), c.env)
	if err != nil {
		c.t.Fatalf("e2e: start %s: %v", pl.Name, err)
	}
	p.ready = func() error {
		code, body, err := getReadyz(p)
		switch {
		case err != nil:
			return err
		case code == http.StatusOK:
			return nil
		case code == http.StatusServiceUnavailable && !strings.Contains(body, "etcd API not serving"):
			return nil
		}
		return fmt.Errorf("GET /readyz: %d %q", code, body)
	}
	if err := p.waitReady(readyTimeout); err != nil {
		c.t.Fatalf("e2e: start %s: %v", pl.Name, err)
	}
	return p
}

// TestReady_waitsForSeedAndKeySpace starts x with --join to an address
// where nothing listens: x serves the etcd API but /readyz answers 503
// naming what is missing. s1 holds keys; the seed starts on x's seed
// address and joins s1. x then joins within joinAfterSeed of the seed
// being ready (its /readyz stops naming gossip), is ready within
// readyTimeout of joining, and when it first answers 200 it already
// holds every key of s1: it caught up before it said so.
func TestReady_waitsForSeedAndKeySpace(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	s1 := c.startNode("s1")
	seedPlan := c.plan("seed")
	x := c.startServing(c.plan("x"), "--join", seedPlan.GossipAddr)

	const want = "not ready: gossip not joined; key space not caught up\n"
	code, body, err := getReadyz(x)
	if err != nil || code != http.StatusServiceUnavailable || body != want {
		t.Fatalf("x /readyz without its seed: got %d %q %v, want 503 %q", code, body, err, want)
	}
	xcli := clusterClient(t, x.ClientAddr)
	if got := grpcHealth(t, xcli); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("x gRPC health without its seed: %v, want NOT_SERVING as /readyz", got)
	}

	// Keys on s1 only: x sees them only by pulling from the cluster.
	const keys = 500
	cli := clusterClient(t, s1.ClientAddr)
	for i := range keys {
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, fmt.Sprintf("k/%04d", i), "v")
		cancel()
		if err != nil {
			t.Fatalf("put on s1: %v", err)
		}
	}
	// Still not ready: nothing answers at its seed.
	if code, body, err := getReadyz(x); err != nil || code != http.StatusServiceUnavailable || body != want {
		t.Fatalf("x /readyz still without its seed: got %d %q %v, want 503 %q", code, body, err, want)
	}

	c.start(seedPlan, "--join", s1.GossipAddr)
	seedReady := time.Now()
	joined, ready := waitJoinedReady(t, x, seedReady)
	t.Logf("x joined %v and was ready %v after its seed; it caught up in %v",
		joined.Round(time.Millisecond), ready.Round(time.Millisecond), (ready - joined).Round(time.Millisecond))
	if got := grpcHealth(t, xcli); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("x gRPC health once /readyz answered ok: %v, want SERVING", got)
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := xcli.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil {
		t.Fatalf("count on x: %v", err)
	}
	if resp.Count != keys {
		t.Errorf("x ready holding %d of s1's %d keys; want all", resp.Count, keys)
	}
}

// waitJoinedReady polls x's /readyz from seedReady, when x's seed became
// ready, and returns how long after it x stopped answering "gossip not
// joined" and then answered 200 "ok". Joining must take at most
// joinAfterSeed; catching up after it, readyTimeout.
func waitJoinedReady(t *testing.T, x *Proc, seedReady time.Time) (joined, ready time.Duration) {
	t.Helper()
	joined = -1
	for {
		code, body, err := getReadyz(x)
		took := time.Since(seedReady)
		if joined < 0 && err == nil && !strings.Contains(body, "gossip not joined") {
			joined = took
		}
		if err == nil && code == http.StatusOK {
			if body != "ok\n" {
				t.Errorf("x /readyz: 200 with body %q, want \"ok\\n\"", body)
			}
			return joined, took
		}
		switch {
		case joined < 0 && took > joinAfterSeed:
			t.Fatalf("x not joined %v after its seed was ready: last /readyz %d %q %v", joinAfterSeed, code, body, err)
		case joined >= 0 && took-joined > readyTimeout:
			t.Fatalf("x joined %v after its seed was ready, then not ready within %v: last /readyz %d %q %v",
				joined.Round(time.Millisecond), readyTimeout, code, body, err)
		}
		time.Sleep(pollInterval)
	}
}

// TestReady_aloneWithoutJoin checks that a node without --join is ready as
// soon as it serves: alone, it is the cluster.
func TestReady_aloneWithoutJoin(t *testing.T) {
	t.Parallel()
	p := StartChute(t) // waits for 200
	code, body, err := getReadyz(p)
	if err != nil || code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz: got %d %q %v, want 200 \"ok\\n\"", code, body, err)
	}
}

// TestReady_selfSeeded starts a node whose only seed is itself, as the
// one pod of a StatefulSet joining its own headless Service: it starts
// the cluster (raft bootstraps it alone), becomes ready and takes writes.
func TestReady_selfSeeded(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	pl := c.plan("solo")
	p := c.start(pl, "--join", pl.GossipAddr) // waits for 200
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := clusterClient(t, p.ClientAddr).Put(ctx, "self-seeded", "v"); err != nil {
		t.Fatalf("put on a node seeded by itself: %v", err)
	}
}
