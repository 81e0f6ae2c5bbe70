package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"chute/internal/testutil"
)

// TestMain fails the package's tests when a goroutine outlives them (a
// memberlist probe in flight is the exception: Memberlist.Shutdown does
// not wait for it, and it ends by itself within the probe timeout), or
// when a node they ran left a default data dir (<name>.chute) here, in
// the repository: every node of a test gets a temporary --data-dir.
func TestMain(m *testing.M) {
	os.Exit(testutil.MainChecks(m, "chute", nil, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode")))
}

// TestOfferNewest: a configuration still waiting to be applied is
// replaced by a newer one; two SIGHUPs close together applied the first
// and dropped the second.
func TestOfferNewest(t *testing.T) {
	ch := make(chan int, 1)
	offerNewest(ch, 1)
	offerNewest(ch, 2)
	if got := <-ch; got != 2 {
		t.Fatalf("waiting: %d, want the newest, 2", got)
	}
	offerNewest(ch, 3)
	if got := <-ch; got != 3 {
		t.Fatalf("waiting: %d, want 3", got)
	}
}
