package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// alarmCmd is an Alarm command.
func alarmCmd(action pb.AlarmRequest_AlarmAction, member uint64, t pb.AlarmType) *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{Action: action, MemberID: member, Alarm: t}}
}

// alarmsOf answers GET of every alarm through the state machine.
func alarmsOf(t *testing.T, sm *StateMachine) string {
	t.Helper()
	return alarmList(apply(t, sm, alarmCmd(pb.AlarmRequest_GET, 0, pb.AlarmType_NONE)).Resp.(*pb.AlarmResponse).Alarms)
}

// alarmList formats alarms as "member:ALARM ..." (the protobuf text of
// AlarmMember is not stable).
func alarmList(as []*pb.AlarmMember) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", a.MemberID, a.Alarm)
	}
	return "[" + b.String() + "]"
}

// TestStateMachine_Alarm_actions checks etcd's answers to ACTIVATE,
// DEACTIVATE and GET: an activation answers the alarm (again when it is
// raised already), NONE raises nothing, a deactivation answers the alarm
// only when it was raised, GET filters by type, and no alarm command
// takes a revision.
func TestStateMachine_Alarm_actions(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	rev := st.Rev()
	steps := []struct {
		req  *pb.InternalRaftRequest
		want string
	}{
		{alarmCmd(pb.AlarmRequest_ACTIVATE, 2, pb.AlarmType_NOSPACE), "[2:NOSPACE]"},
		{alarmCmd(pb.AlarmRequest_ACTIVATE, 2, pb.AlarmType_NOSPACE), "[2:NOSPACE]"},
		{alarmCmd(pb.AlarmRequest_ACTIVATE, 1, pb.AlarmType_NOSPACE), "[1:NOSPACE]"},
		{alarmCmd(pb.AlarmRequest_ACTIVATE, 3, pb.AlarmType_NONE), "[]"},
		{alarmCmd(pb.AlarmRequest_GET, 0, pb.AlarmType_NONE), "[1:NOSPACE 2:NOSPACE]"},
		{alarmCmd(pb.AlarmRequest_GET, 0, pb.AlarmType_CORRUPT), "[]"},
		{alarmCmd(pb.AlarmRequest_DEACTIVATE, 3, pb.AlarmType_NOSPACE), "[]"},
		{alarmCmd(pb.AlarmRequest_DEACTIVATE, 2, pb.AlarmType_NOSPACE), "[2:NOSPACE]"},
		{alarmCmd(pb.AlarmRequest_GET, 0, pb.AlarmType_NOSPACE), "[1:NOSPACE]"},
	}
	for i, s := range steps {
		res := apply(t, sm, s.req)
		if got := alarmList(res.Resp.(*pb.AlarmResponse).Alarms); got != s.want {
			t.Fatalf("step %d %v: got %s, want %s", i, s.req.Alarm, got, s.want)
		}
		if res.Rev != rev {
			t.Fatalf("step %d: revision %d, want %d unchanged", i, res.Rev, rev)
		}
	}
	if !st.NoSpace() || !st.HasAlarm(1, pb.AlarmType_NOSPACE) || st.HasAlarm(2, pb.AlarmType_NOSPACE) {
		t.Fatalf("NoSpace %v, member 1 %v, member 2 %v; want true, true, false", st.NoSpace(), st.HasAlarm(1, pb.AlarmType_NOSPACE), st.HasAlarm(2, pb.AlarmType_NOSPACE))
	}
	apply(t, sm, alarmCmd(pb.AlarmRequest_DEACTIVATE, 1, pb.AlarmType_NOSPACE))
	if st.NoSpace() {
		t.Fatal("NoSpace after the last NOSPACE alarm was disarmed")
	}
}

// TestStateMachine_Alarm_capsWrites checks what a NOSPACE alarm refuses,
// as etcd's capped applier does (puts, txns with a put in any branch,
// lease grants) and what it lets through (deletes, read-only and
// delete-only txns, compaction, lease revokes and checkpoints), that a
// refused command changes nothing, and that writes resume on disarm.
func TestStateMachine_Alarm_capsWrites(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	put(t, sm, "/a", "1")
	put(t, sm, "/b", "1")
	apply(t, sm, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}})
	apply(t, sm, alarmCmd(pb.AlarmRequest_ACTIVATE, 9, pb.AlarmType_NOSPACE))

	putOp := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("/c"), Value: []byte("x")}}}
	delOp := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/b")}}}
	rangeOp := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("/a")}}}
	nested := &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Failure: []*pb.RequestOp{putOp}}}}
	refused := map[string]*pb.InternalRaftRequest{
		"put":                  {Put: &pb.PutRequest{Key: []byte("/c"), Value: []byte("x")}},
		"put over a key":       {Put: &pb.PutRequest{Key: []byte("/a"), Value: []byte("2")}},
		"lease grant":          {LeaseGrant: &pb.LeaseGrantRequest{ID: 8, TTL: 60}},
		"txn put":              {Txn: &pb.TxnRequest{Success: []*pb.RequestOp{putOp}}},
		"txn put in failure":   {Txn: &pb.TxnRequest{Success: []*pb.RequestOp{delOp}, Failure: []*pb.RequestOp{putOp}}},
		"txn with nested put":  {Txn: &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp, nested}}},
		"txn put and a delete": {Txn: &pb.TxnRequest{Success: []*pb.RequestOp{delOp, putOp}}},
	}
	rev := st.Rev()
	for name, req := range refused {
		res := sm.ApplyLocal(req)
		if !errors.Is(res.Err, ErrNoSpace) || res.Rev != rev {
			t.Errorf("%s: got %v at revision %d, want %v at %d", name, res.Err, res.Rev, ErrNoSpace, rev)
		}
	}
	if got, _ := get(t, st, "/a", 0); got != "1" {
		t.Fatalf("/a after refused writes: %q, want 1", got)
	}
	if _, err := st.TimeToLive(8, false); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("lease 8 after a refused grant: %v, want %v", err, ErrLeaseNotFound)
	}

	allowed := []struct {
		name string
		req  *pb.InternalRaftRequest
	}{
		{"read-only txn", &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp}}}},
		{"delete-only txn", &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{delOp}}}},
		{"delete", &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("/a")}}},
		{"lease checkpoint", &pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: []*pb.LeaseCheckpoint{{ID: 7, Remaining_TTL: 30}}}}},
		{"lease revoke", &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: 7}}},
		{"compaction", &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: st.Rev()}}},
	}
	for _, a := range allowed {
		if res := sm.ApplyLocal(a.req); res.Err != nil {
			t.Fatalf("%s under NOSPACE: %v", a.name, res.Err)
		}
	}
	if got, _ := get(t, st, "/a", 0); got != "" {
		t.Fatalf("/a after its delete: %q", got)
	}

	apply(t, sm, alarmCmd(pb.AlarmRequest_DEACTIVATE, 9, pb.AlarmType_NOSPACE))
	for name, req := range refused {
		if res := sm.ApplyLocal(req); res.Err != nil {
			t.Errorf("%s after disarm: %v", name, res.Err)
		}
	}
}

// TestStateMachine_Restore_alarms checks that alarms travel in snapshots
// (version 2), that a snapshot without alarms is still version 1, and
// that restoring one clears the alarms a member had.
func TestStateMachine_Restore_alarms(t *testing.T) {
	a, _ := newTestStateMachine(t, Config{})
	put(t, a, "/k", "v")
	plain := snapshot(t, a)
	if !bytes.HasPrefix(plain, []byte(snapshotMagicV1)) {
		t.Fatalf("snapshot without alarms starts %q, want %q", plain[:8], snapshotMagicV1)
	}
	apply(t, a, alarmCmd(pb.AlarmRequest_ACTIVATE, 5, pb.AlarmType_NOSPACE))
	apply(t, a, alarmCmd(pb.AlarmRequest_ACTIVATE, 3, pb.AlarmType_NOSPACE))
	withAlarms := snapshot(t, a)
	if !bytes.HasPrefix(withAlarms, []byte(snapshotMagicV2)) {
		t.Fatalf("snapshot with alarms starts %q, want %q", withAlarms[:8], snapshotMagicV2)
	}

	b, sb := newTestStateMachine(t, Config{})
	if err := b.Restore(bytes.NewReader(withAlarms)); err != nil {
		t.Fatal(err)
	}
	if got, want := alarmsOf(t, b), alarmsOf(t, a); got != want {
		t.Fatalf("alarms after restore: %s, want %s", got, want)
	}
	if res := b.ApplyLocal(&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("/k"), Value: []byte("w")}}); !errors.Is(res.Err, ErrNoSpace) {
		t.Fatalf("put after restoring a NOSPACE alarm: %v, want %v", res.Err, ErrNoSpace)
	}
	if err := b.Restore(bytes.NewReader(plain)); err != nil {
		t.Fatal(err)
	}
	if got := alarmsOf(t, b); got != "[]" || sb.NoSpace() {
		t.Fatalf("alarms after restoring a version 1 snapshot: %s (NoSpace %v), want none", got, sb.NoSpace())
	}
	put(t, b, "/k", "w")
}
