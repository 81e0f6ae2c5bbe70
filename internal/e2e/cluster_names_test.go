//go:build e2e

package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// duplicateExitTimeout bounds the time from the start of a node that takes
// a running node's name to its exit.
const duplicateExitTimeout = 10 * time.Second

// TestCluster_duplicateNameNewerExits starts node A, then node B under the
// same --name joining A. serf's own vote would stop both (neither has a
// third member to ask); chute stops the one that started later: B exits 1
// within duplicateExitTimeout and logs why, naming A's gossip address,
// while A keeps serving, alone in its member list.
func TestCluster_duplicateNameNewerExits(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("dup")
	b, err := launchChute(t, c.args(c.plan("dup"), "--join", a.GossipAddr), c.env)
	if err != nil {
		t.Fatalf("start b: %v", err)
	}
	if code := b.WaitExit(t, duplicateExitTimeout); code != exitFatalCode {
		t.Errorf("b: exit code %d, want %d", code, exitFatalCode)
	}
	log := b.Output()
	for _, want := range []string{"level=ERROR", "another node uses this name", a.GossipAddr} {
		if !strings.Contains(log, want) {
			t.Errorf("b's log lacks %q", want)
		}
	}

	select {
	case <-a.Done():
		t.Fatalf("a exited: %v", a.err)
	default:
	}
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + a.MetricsAddr + "/readyz")
	if err != nil {
		t.Fatalf("a: GET /readyz: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a: GET /readyz: %s, want 200", resp.Status)
	}
	waitMembers(t, []*Proc{a}, []*Proc{a})
}

// exitFatalCode is chute's exit code when the node stopped on an error.
const exitFatalCode = 1
