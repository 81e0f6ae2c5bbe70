package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCluster_noClaimFromADispatcherThatAnswers makes b's gossip call a,
// the dispatcher, gone while a still serves (as a member that was cut off
// sees it just after a partition healed): b's puts do not claim the queue,
// they are held. Once a is really gone, b's next put claims it.
func TestCluster_noClaimFromADispatcherThatAnswers(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/pinged/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(a.id, ";epoch=1")
	if rec := recordOn(b, "pinged"); !strings.HasPrefix(rec, want) {
		t.Fatalf("record after a's put: %q, want a at epoch 1 (%s)", rec, want)
	}

	b.peers.setGone(a.asPeer())
	for i := range 5 {
		if _, err := b.cli.Put(ctx, fmt.Sprintf("/q/pinged/p/held-%d", i), "v"); err != nil {
			t.Fatalf("put on b while its gossip calls a gone: %v", err)
		}
	}
	if rec := recordOn(b, "pinged"); !strings.HasPrefix(rec, want) {
		t.Fatalf("record after b's puts: %q, want a still at epoch 1: a answered b's ping", rec)
	}

	a.stop()
	if _, err := b.cli.Put(ctx, "/q/pinged/p/after", "v"); err != nil {
		t.Fatal(err)
	}
	if rec := recordOn(b, "pinged"); !strings.HasPrefix(rec, fmt.Sprint(b.id, ";epoch=2")) {
		t.Fatalf("record after a stopped: %q, want b at epoch 2", rec)
	}
}
