package gossip

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
// memberlist's probe of a node runs in its own goroutine, which its
// Shutdown does not wait for: it ends at its probe interval, after the
// test may have. It is memberlist's, not ours, and is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode.func1"),
	)
}
