package kvtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLog_noSpaceAlarm raises NOSPACE on one member of three and checks
// that the alarm is the cluster's: listed by every member, putting
// refused through every member while deletes go on, carried to a member
// that joins from a snapshot, and lifted everywhere by etcdctl's disarm
// (list, then deactivate each) through another member.
func TestLog_noSpaceAlarm(t *testing.T) {
	log := New()
	srvs, clis := startLogMembers(t, log, 3)
	ctx := testCtx(t, 20*time.Second)
	for i, cli := range clis {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := srvs[1].RaiseNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	// One more, through the API as an operator would, for member 0x100.
	m := pb.NewMaintenanceClient(clis[2].ActiveConnection())
	if _, err := m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 0x100, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	const want = "[256:NOSPACE 257:NOSPACE]"
	for i, cli := range clis {
		if got := alarmList(t, cli); got != want {
			t.Fatalf("member %d lists %s, want %s", i, got, want)
		}
		if _, err := cli.Put(ctx, "/new", "v"); !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Fatalf("put through member %d: %v, want %v", i, err, rpctypes.ErrNoSpace)
		}
		if _, err := cli.Delete(ctx, fmt.Sprintf("/k/%d", i)); err != nil {
			t.Fatalf("delete through member %d: %v", i, err)
		}
	}

	_, late := startLogMember(t, log, 0x103) // restored from a snapshot
	if got := alarmList(t, late); got != want {
		t.Fatalf("member restored from a snapshot lists %s, want %s", got, want)
	}
	if _, err := late.Put(ctx, "/new", "v"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("put through the restored member: %v, want %v", err, rpctypes.ErrNoSpace)
	}

	disarmed, err := clis[0].AlarmDisarm(ctx, &clientv3.AlarmMember{})
	if err != nil {
		t.Fatal(err)
	}
	if len(disarmed.Alarms) != 2 {
		t.Fatalf("disarm answered %v, want both alarms", disarmed.Alarms)
	}
	for i, cli := range append(clis, late) {
		if got := alarmList(t, cli); got != "[]" {
			t.Fatalf("member %d lists %s after disarm, want none", i, got)
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/after/%d", i), "v"); err != nil {
			t.Fatalf("put through member %d after disarm: %v", i, err)
		}
	}
}

// alarmList returns cli's member's alarm list as "[member:ALARM ...]".
func alarmList(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	ctx := testCtx(t, 5*time.Second)
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(resp.Alarms))
	for i, a := range resp.Alarms {
		out[i] = fmt.Sprintf("%d:%s", a.MemberID, a.Alarm)
	}
	return fmt.Sprint(out)
}
