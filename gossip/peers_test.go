package gossip

import (
	"slices"
	"testing"

	"chute/internal/testutil"
)

// peerIDs returns the ids Peers reports, sorted.
func peerIDs(m *testMember) []uint64 {
	var ids []uint64
	for _, p := range m.Peers() {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestMembership_Peers_followsMembership(t *testing.T) {
	a, b, c := startTrio(t, 11, nil)
	want := []uint64{MemberID("b"), MemberID("c")}
	slices.Sort(want)
	testutil.EventuallyTrue(t, settle, "a to list b and c as peers", func() bool {
		return slices.Equal(peerIDs(a), want)
	})
	// Nothing changed: the same list is handed out again, not rebuilt.
	if p, q := a.Peers(), a.Peers(); len(p) == 0 || &p[0] != &q[0] {
		t.Errorf("two calls with no member event between built two lists")
	}
	for _, p := range a.Peers() {
		if p.Addr == "" || p.Boot == "" {
			t.Errorf("peer %x: addr %q boot %q, want both", p.ID, p.Addr, p.Boot)
		}
	}

	leaveAndShutdown(t, b)
	testutil.EventuallyTrue(t, settle, "a and c to drop b from their peers", func() bool {
		return slices.Equal(peerIDs(a), []uint64{MemberID("c")}) && slices.Equal(peerIDs(c), []uint64{MemberID("a")})
	})
}
