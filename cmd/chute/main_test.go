package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (a
// memberlist probe in flight is the exception: Memberlist.Shutdown does
// not wait for it, and it ends by itself within the probe timeout), or
// when a node they ran left a default data dir (<name>.chute) here, in
// the repository: every node of a test gets a temporary --data-dir.
func TestMain(m *testing.M) {
	before, _ := filepath.Glob("*.chute")
	code := m.Run()
	after, _ := filepath.Glob("*.chute")
	for _, d := range after {
		if !slices.Contains(before, d) {
			fmt.Fprintf(os.Stderr, "chute: the tests left the data dir %s in the repository: give the node a temporary --data-dir\n", d)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode")); err != nil {
			fmt.Fprintf(os.Stderr, "chute: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
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
