package gossip

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"

	"chute/internal/testutil"
)

// replicateAs sends batches on one Replicate stream to n as member from,
// and returns how the stream ended.
func replicateAs(t *testing.T, n *replNode, from uint64, batches ...[]*peerpb.Write) error {
	t.Helper()
	conn, err := peer.Dial(n.link.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(peer.OutgoingContext(context.Background(), ClusterID("test"), from), 10*time.Second)
	defer cancel()
	stream, err := peerpb.NewPeerClient(conn).Replicate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := stream.Send(&peerpb.WriteBatch{Writes: b}); err != nil {
			break // the server ended the stream: CloseAndRecv says why
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

// TestReplicator_farAheadStampRefused: a peer's write stamped 2^64-1 is
// refused with OutOfRange and logged once with the sender's id; the
// receiver's clock does not move, so later writes still win everywhere.
func TestReplicator_farAheadStampRefused(t *testing.T) {
	var logs testutil.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a := startReplNode(t, "a", func(c *ReplicatorConfig) { c.Logger = log })
	b := startReplNode(t, "b", nil)
	mesh(a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	const mallory = 0xbad
	evil := []*peerpb.Write{{Key: []byte("k"), Value: []byte("evil"), Lamport: math.MaxUint64, Member: mallory}}
	for range 3 {
		if err := replicateAs(t, a, mallory, evil); status.Code(err) != codes.OutOfRange {
			t.Fatalf("got %v, want OutOfRange", err)
		}
	}
	if got := strings.Count(logs.String(), "replicated writes refused"); got != 1 {
		t.Fatalf("got %d warnings, want 1 (once per peer per minute):\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "peer=0000000000000bad") {
		t.Fatalf("warning without level WARN or the sender's id:\n%s", logs.String())
	}
	if _, err := b.cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 10*time.Second, "v2 on both nodes", func() bool {
		return value(t, a, "k") == "v2" && value(t, b, "k") == "v2"
	})
}

func TestRefusals_warn_oncePerPeerPerInterval(t *testing.T) {
	var logs testutil.Buffer
	now := time.Unix(1000, 0)
	r := newRefusals(slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return now })
	r.warn(1, "refused", nil)
	r.warn(1, "refused", nil)
	r.warn(2, "refused", nil)
	now = now.Add(refusalLogEvery)
	r.warn(1, "refused", nil)
	if got := strings.Count(logs.String(), "refused"); got != 3 {
		t.Fatalf("got %d warnings, want 3 (1, 2, then 1 again an interval later):\n%s", got, logs.String())
	}
	for i := range uint64(2 * refusalPeers) {
		r.warn(100+i, "many", nil)
	}
	r.mu.Lock()
	n := len(r.last)
	r.mu.Unlock()
	if n > refusalPeers {
		t.Fatalf("remembers %d peers, want at most %d", n, refusalPeers)
	}
}
