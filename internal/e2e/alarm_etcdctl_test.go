//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/internal/testutil"
)

// activateNoSpace raises NOSPACE for the member at endpoint, through the
// Maintenance API (etcdctl cannot raise an alarm), and returns its member
// id. It reports errors rather than failing the test, so that a session's
// goroutine may call it. With E2E_ETCDCTL_AUTH set it logs in as root,
// as the pair's etcdctl does.
func activateNoSpace(endpoint string) (uint64, error) {
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: rpcTimeout, Logger: zap.NewNop()}
	if os.Getenv(authParityEnv) != "" {
		cfg.Username, cfg.Password = "root", authRootPass
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return 0, fmt.Errorf("client of %s: %w", endpoint, err)
	}
	defer cli.Close()
	ctx, cancel := rpcCtx()
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return 0, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	id := st.Header.MemberId
	_, err = pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_NOSPACE,
	})
	if err != nil {
		return 0, fmt.Errorf("activate NOSPACE for %x: %w", id, err)
	}
	return id, nil
}

// With a NOSPACE alarm raised, etcdctl sees on chute what it sees on
// etcd: the alarm in alarm list and endpoint status, puts, txns with a
// put and lease grants refused, deletes and compaction going on, and
// alarm disarm lifting it.
func TestEtcdctl_alarmNoSpace(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "1")
		if _, err := activateNoSpace(s.p.ClientAddr); err != nil {
			s.fail("%v", err)
		}
		s.note("NOSPACE activated through the Maintenance API")
		s.ctl("alarm", "list")
		s.ctl("endpoint", "status")
		s.ctl("put", "a", "2")
		s.ctl("put", "c", "1")
		s.ctlIn("\n\nput c 1\n\n", "txn", "-i")
		s.ctlIn("\n\ndel b\n\n", "txn", "-i")
		s.ctl("lease", "grant", "60")
		s.ctl("del", "a")
		s.ctl("compaction", "3")
		s.ctl("get", "-w", "json", "--prefix", "")
		s.ctl("alarm", "disarm")
		s.ctl("alarm", "list")
		s.ctl("put", "a", "3")
		s.ctl("get", "a")
	})
}

// On a raft cluster the alarm raised for one member is the cluster's:
// etcdctl lists it on every member, puts through every member are
// refused with etcd's error while deletes go on, and one etcdctl alarm
// disarm lifts it everywhere.
func TestRaft_alarmNoSpace(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	etcdctl := lookTool(t, "etcdctl")
	for i, p := range nodes {
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "put", fmt.Sprintf("/k/%d", i), "v")
		if err != nil || res.Code != 0 {
			t.Fatalf("%s: etcdctl put: %v %+v", p, err, res)
		}
	}
	id, err := activateNoSpace(nodes[1].ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("memberID:%d alarm:NOSPACE \n", id)
	for i, p := range nodes {
		// The alarm list is linearizable: no wait for the others to apply.
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "alarm", "list")
		if err != nil || res.Code != 0 || res.Stdout != want {
			t.Fatalf("%s: etcdctl alarm list: %v %+v, want %q", p, err, res, want)
		}
		res, err = runEtcdctl(etcdctl, p.ClientAddr, "", "put", "/new", "v")
		if err != nil || res.Code == 0 || !strings.Contains(res.Stderr, "etcdserver: mvcc: database space exceeded") {
			t.Fatalf("%s: etcdctl put under NOSPACE: %v %+v, want etcd's database space exceeded", p, err, res)
		}
		res, err = runEtcdctl(etcdctl, p.ClientAddr, "", "del", fmt.Sprintf("/k/%d", i))
		if err != nil || res.Code != 0 || res.Stdout != "1\n" {
			t.Fatalf("%s: etcdctl del under NOSPACE: %v %+v, want 1 deleted", p, err, res)
		}
	}
	res, err := runEtcdctl(etcdctl, nodes[0].ClientAddr, "", "alarm", "disarm")
	if err != nil || res.Code != 0 || res.Stdout != want {
		t.Fatalf("etcdctl alarm disarm: %v %+v, want %q", err, res, want)
	}
	for i, p := range nodes {
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "alarm", "list")
		if err != nil || res.Code != 0 || res.Stdout != "" {
			t.Fatalf("%s: etcdctl alarm list after disarm: %v %+v, want nothing", p, err, res)
		}
		res, err = runEtcdctl(etcdctl, p.ClientAddr, "", "put", fmt.Sprintf("/after/%d", i), "v")
		if err != nil || res.Code != 0 {
			t.Fatalf("%s: etcdctl put after disarm: %v %+v", p, err, res)
		}
	}
	testutil.Eventually(t, leaderTimeout, "every member holds the puts after disarm", func() error {
		for _, cli := range clis {
			ctx, cancel := rpcCtx()
			resp, err := cli.Get(ctx, "/after/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
			cancel()
			if err != nil {
				return err
			}
			if resp.Count != 3 {
				return fmt.Errorf("%d of 3 keys", resp.Count)
			}
		}
		return nil
	})
}
