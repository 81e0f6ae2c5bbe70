//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// multiPuts is how many puts TestCluster_multiEndpointClient makes through
// each client: enough for a round-robin balancer to use every endpoint.
const multiPuts = 9

// TestCluster_multiEndpointClient uses etcdctl --endpoints=a,b,c and a
// clientv3 client of the three endpoints: puts, gets, member list and a
// background watch that sees every put made through the multi-endpoint
// client, whichever node each put reached. With a killed, both clients
// still put and get through b and c.
func TestCluster_multiEndpointClient(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	eps := endpointsOf(all)
	etcdctl := lookTool(t, "etcdctl")
	ctl := func(endpoints string, args ...string) string {
		t.Helper()
		res, err := runEtcdctl(etcdctl, endpoints, "", args...)
		if err != nil || res.Code != 0 {
			t.Fatalf("etcdctl --endpoints=%s %s: %v %+v", endpoints, strings.Join(args, " "), err, res)
		}
		return res.Stdout
	}

	watch := startCtl(t, eps, "watch", "--prefix", "m/")
	// The watch is set up once it shows a put made after it started.
	testutil.Eventually(t, watchTimeout, "etcdctl watch on a, b, c set up", func() error {
		ctl(eps, "put", "m/ready", "x")
		if !strings.Contains(watch.output(), "m/ready\n") {
			return errors.New("the watch shows no m/ready")
		}
		return nil
	})
	for i := range multiPuts {
		key, val := fmt.Sprintf("m/ctl%d", i), fmt.Sprintf("v%d", i)
		if got := ctl(eps, "put", key, val); got != "OK\n" {
			t.Errorf("etcdctl put %s through a, b, c: got %q, want OK", key, got)
		}
		// Reads may reach another node than the put: they converge.
		want := key + "\n" + val + "\n"
		testutil.Eventually(t, convergeTimeout, "get "+key+" through a, b, c", func() error {
			if got := ctl(eps, "get", key); got != want {
				return fmt.Errorf("got %q, want %q", got, want)
			}
			return nil
		})
		if !watch.waitFor(func(out string) bool { return strings.Contains(out, "PUT\n"+want) }) {
			t.Fatalf("etcdctl watch through a, b, c: no PUT of %s within %v:\n%s", key, watchTimeout, watch.output())
		}
	}
	got, err := ctlMembers(etcdctl, eps)
	if want := memberLines(all); err != nil || !slices.Equal(got, want) {
		t.Errorf("etcdctl member list through a, b, c: got %q, %v; want %q", got, err, want)
	}

	// clientv3 with three endpoints.
	cli := clusterClient(t, a.ClientAddr, b.ClientAddr, cc.ClientAddr)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := cli.Watch(wctx, "m/go", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	select {
	case resp := <-wch:
		if !resp.Created {
			t.Fatalf("clientv3 watch through a, b, c: got %+v, want the created response", resp)
		}
	case <-time.After(rpcTimeout):
		t.Fatalf("clientv3 watch through a, b, c: not created within %v", rpcTimeout)
	}
	want := make(map[string]string)
	for i := range multiPuts {
		key, val := fmt.Sprintf("m/go%d", i), fmt.Sprintf("v%d", i)
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, key, val)
		cancel()
		if err != nil {
			t.Fatalf("clientv3 put %s through a, b, c: %v", key, err)
		}
		want[key] = val
	}
	seen := make(map[string]string)
	timeout := time.After(watchTimeout)
	for len(seen) < len(want) {
		select {
		case resp := <-wch:
			if err := resp.Err(); err != nil {
				t.Fatalf("clientv3 watch through a, b, c: %v", err)
			}
			for _, ev := range resp.Events {
				seen[string(ev.Kv.Key)] = string(ev.Kv.Value)
			}
		case <-timeout:
			t.Fatalf("clientv3 watch through a, b, c: saw %v within %v, want %v", seen, watchTimeout, want)
		}
	}
	if diff := dumpDiff(want, seen); diff != "" {
		t.Errorf("clientv3 watch through a, b, c: %s", diff)
	}
	testutil.Eventually(t, convergeTimeout, "clientv3 get through a, b, c", func() error {
		ctx, cancel := rpcCtx()
		defer cancel()
		resp, err := cli.Get(ctx, "m/go", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		got := make(map[string]string)
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		if diff := dumpDiff(want, got); diff != "" {
			return errors.New(diff)
		}
		return nil
	})
	waitConverged(t, all, clientsOf(t, all...), nil, convergeTimeout)

	// With a dead, both clients carry on through b and c.
	a.Kill()
	if got := ctl(eps, "put", "m/after-kill", "ctl"); got != "OK\n" {
		t.Errorf("etcdctl put through a (dead), b, c: got %q, want OK", got)
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := cli.Put(ctx, "m/go-after-kill", "go"); err != nil {
		t.Errorf("clientv3 put through a (dead), b, c: %v", err)
	}
	live := []*Proc{b, cc}
	waitConverged(t, live, clientsOf(t, live...), nil, convergeTimeout)
	for _, key := range []string{"m/after-kill", "m/go-after-kill"} {
		if out := ctl(eps, "get", "--print-value-only", key); out == "" {
			t.Errorf("etcdctl get %s through a (dead), b, c: empty", key)
		}
	}
}
