package raftpeer

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/internal/testutil"
)

// testCluster returns the cluster id of the tests' peer listeners.
func testCluster() uint64 { return gossip.ClusterID("raftpeer-test") }

// startListener serves the services register adds on a real peer
// listener (peer.Server, with its cluster check) bound to addr, and stops
// it at cleanup, or earlier with the returned function.
func startListener(t *testing.T, addr string, register func(grpc.ServiceRegistrar)) (stop func()) {
	t.Helper()
	srv, err := peer.NewServer(peer.Config{
		ListenURLs: []string{"http://" + addr},
		ClusterID:  testCluster(),
	})
	if err != nil {
		t.Fatal(err)
	}
	register(srv)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	t.Cleanup(stop)
	return stop
}

// newTransport builds a transport for addr with the tests' cluster id,
// closed at cleanup.
func newTransport(t *testing.T, addr string, mutate func(*Config)) *Transport {
	t.Helper()
	cfg := Config{
		LocalAddr: raft.ServerAddress(addr),
		ClusterID: testCluster(),
		MemberID:  gossip.MemberID(addr),
		Timeout:   5 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// servedTransport is a transport served on its own peer listener.
func servedTransport(t *testing.T, mutate func(*Config)) *Transport {
	t.Helper()
	addr := testutil.FreeAddr(t)
	tr := newTransport(t, addr, mutate)
	startListener(t, addr, tr.Register)
	return tr
}
