package kv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recordingQueues is a Queues that takes /q/x/p/... as producer keys and
// /q/x/1/... as delivery keys, and records what reaches it.
type recordingQueues struct {
	mu       sync.Mutex // guards produced and acked
	produced []string
	acked    []string
}

var _ Queues = (*recordingQueues)(nil)

func (q *recordingQueues) Route(key []byte) Route {
	switch {
	case strings.HasPrefix(string(key), "/q/x/p/"):
		return RouteProduce
	case strings.HasPrefix(string(key), "/q/x/1/"):
		return RouteDelivery
	}
	return RouteKV
}

func (q *recordingQueues) Produce(_ context.Context, puts []*pb.PutRequest) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range puts {
		q.produced = append(q.produced, string(p.Key))
	}
	return nil
}

func (q *recordingQueues) Check(_, _ []byte) error { return nil }

func (q *recordingQueues) Ack(_ context.Context, key []byte) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.acked = append(q.acked, string(key))
	return true, nil
}

func (q *recordingQueues) Consume(_ []byte, _ Deliveries) (func(), error) { return func() {}, nil }

// seen returns what was produced and acknowledged so far.
func (q *recordingQueues) seen() (produced, acked []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.produced), slices.Clone(q.acked)
}

// TestServer_RaiseNoSpace checks the NOSPACE alarm of a member alone
// from raising to disarm: it is listed (and in Status's errors, as etcd
// shows it), raising again proposes nothing, the writes that grow the
// data are refused with etcd's error, queue puts before they reach
// Queues, while deletes, acks, compaction and lease revokes and
// keep-alives go on; etcdctl's disarm lifts it.
func TestServer_RaiseNoSpace(t *testing.T) {
	q := &recordingQueues{}
	srv, cli := startServer(t, func(c *Config) { c.Queues = q })
	ctx := testCtx(t, 20*time.Second)
	if _, err := cli.Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.RaiseNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	applied := srv.StateMachine().Applied()
	if err := srv.RaiseNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.StateMachine().Applied(); got != applied {
		t.Fatalf("raising a raised alarm applied up to %d, want %d: nothing proposed", got, applied)
	}
	list, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Alarms) != 1 || list.Alarms[0].MemberID != 0xabcd || list.Alarms[0].Alarm != pb.AlarmType_NOSPACE {
		t.Fatalf("alarm list: got %v, want member abcd NOSPACE", list.Alarms)
	}
	st, err := cli.Status(ctx, srv.ClientAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"memberID:43981 alarm:NOSPACE "}; !slices.Equal(st.Errors, want) {
		t.Fatalf("status errors: got %q, want %q", st.Errors, want)
	}

	refused := []struct {
		name string
		do   func() error
	}{
		{"put", func() error { _, err := cli.Put(ctx, "/b", "1"); return err }},
		{"txn with a put", func() error {
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/a"), "=", 99)).Else(clientv3.OpPut("/b", "1")).Commit()
			return err
		}},
		{"lease grant", func() error { _, err := cli.Grant(ctx, 60); return err }},
		{"queue put", func() error { _, err := cli.Put(ctx, "/q/x/p/1", `{"a":1}`); return err }},
		{"batch produce", func() error { _, err := cli.Txn(ctx).Then(clientv3.OpPut("/q/x/p/2", `{"a":2}`)).Commit(); return err }},
	}
	for _, r := range refused {
		err := r.do()
		var ee rpctypes.EtcdError
		if !errors.Is(err, rpctypes.ErrNoSpace) || !errors.As(err, &ee) || ee.Code() != codes.ResourceExhausted {
			t.Errorf("%s under NOSPACE: got %v, want %v (ResourceExhausted)", r.name, err, rpctypes.ErrNoSpace)
		}
	}
	if produced, _ := q.seen(); len(produced) != 0 {
		t.Fatalf("queue puts under NOSPACE reached Queues: %q", produced)
	}

	allowed := []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := cli.Get(ctx, "/a"); return err }},
		{"keep-alive", func() error { _, err := cli.KeepAliveOnce(ctx, lease.ID); return err }},
		{"delete", func() error { _, err := cli.Delete(ctx, "/a"); return err }},
		{"ack", func() error { _, err := cli.Delete(ctx, "/q/x/1/k"); return err }},
		{"compact", func() error { _, err := cli.Compact(ctx, srv.store.Rev()); return err }},
		{"lease revoke", func() error { _, err := cli.Revoke(ctx, lease.ID); return err }},
	}
	for _, a := range allowed {
		if err := a.do(); err != nil {
			t.Errorf("%s under NOSPACE: %v", a.name, err)
		}
	}

	disarmed, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{})
	if err != nil {
		t.Fatal(err)
	}
	if len(disarmed.Alarms) != 1 || disarmed.Alarms[0].MemberID != 0xabcd {
		t.Fatalf("disarm: got %v, want the NOSPACE alarm of abcd", disarmed.Alarms)
	}
	if list, err := cli.AlarmList(ctx); err != nil || len(list.Alarms) != 0 {
		t.Fatalf("alarm list after disarm: %v %v, want none", list, err)
	}
	for _, r := range refused {
		if err := r.do(); err != nil {
			t.Errorf("%s after disarm: %v", r.name, err)
		}
	}
	if produced, acked := q.seen(); !slices.Equal(produced, []string{"/q/x/p/1", "/q/x/p/2"}) || !slices.Equal(acked, []string{"/q/x/1/k"}) {
		t.Fatalf("Queues saw produced %q acked %q, want the two puts after disarm and the ack", produced, acked)
	}
}

// TestMaintenance_Alarm_unsupported checks that only NOSPACE can be
// activated and unknown actions and types are refused, as InvalidArgument,
// raising nothing.
func TestMaintenance_Alarm_unsupported(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	m := pb.NewMaintenanceClient(cli.ActiveConnection())
	for _, r := range []*pb.AlarmRequest{
		{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_CORRUPT},
		{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType(42)},
		{Action: pb.AlarmRequest_AlarmAction(7), MemberID: 1, Alarm: pb.AlarmType_NOSPACE},
	} {
		if _, err := m.Alarm(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: got %v, want InvalidArgument", r, err)
		}
	}
	if resp, err := m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NONE}); err != nil || len(resp.Alarms) != 0 {
		t.Fatalf("activate NONE: %v %v, want nothing raised, as etcd", resp, err)
	}
	if list, err := cli.AlarmList(ctx); err != nil || len(list.Alarms) != 0 {
		t.Fatalf("alarm list: %v %v, want none", list, err)
	}
}
