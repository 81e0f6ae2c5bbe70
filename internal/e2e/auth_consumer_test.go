//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// requireWatchDenied fails the test unless a watch of key by cli ends at
// once with etcd's permission denied.
func requireWatchDenied(t testing.TB, cli *clientv3.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	for resp := range cli.Watch(ctx, key) {
		if err := resp.Err(); err != nil {
			// etcd cancels the watch with the error's text as the reason.
			if !resp.Canceled || !strings.Contains(err.Error(), "code = PermissionDenied desc = "+rpctypes.ErrPermissionDenied.Error()) {
				t.Errorf("watch %s: got canceled %v, %v; want canceled, %v", key, resp.Canceled, err, rpctypes.ErrPermissionDenied)
			}
			return
		}
		if len(resp.Events) > 0 {
			t.Errorf("watch %s: got events %v, want permission denied", key, resp.Events)
			return
		}
	}
	t.Errorf("watch %s: no answer within %v, want permission denied", key, watchTimeout)
}

// authDelivery is a delivery of the jobs queue as its watch shows it.
var authDelivery = regexp.MustCompile(`^/q/jobs/([1-9][0-9]*)/(m[0-9]+)$`)

// nextDeliveries returns the seq and key of the next n deliveries on wch.
func nextDeliveries(t testing.TB, wch clientv3.WatchChan, n int) (seqs, keys []string) {
	t.Helper()
	timer := time.NewTimer(deliverTimeout)
	defer timer.Stop()
	for len(keys) < n {
		select {
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				t.Fatalf("consumer watch ended: %v", resp.Err())
			}
			for _, ev := range resp.Events {
				m := authDelivery.FindStringSubmatch(string(ev.Kv.Key))
				if ev.Type != mvccpb.PUT || m == nil {
					t.Fatalf("consumer watch: got %v %q, want a delivery /q/jobs/{seq}/{key}", ev.Type, ev.Kv.Key)
				}
				seqs, keys = append(seqs, m[1]), append(keys, m[2])
			}
		case <-timer.C:
			t.Fatalf("%d deliveries within %v, want %d", len(keys), deliverTimeout, n)
		}
	}
	return seqs, keys
}

// TestAuth_consumer_ownKeysOnly runs the consumer role of operations.md:
// worker-1 may read /q/jobs/c/worker-1 and write under
// /q/jobs/c/worker-1/. Its watch receives what the producer put, it
// acknowledges under its consumer key and the queue drains; it hears
// permission denied when it watches worker-2's key, acknowledges with the
// short delivery key, produces or reads the settings, and the message it
// failed to acknowledge is still outstanding.
func TestAuth_consumer_ownKeysOnly(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	for _, args := range [][]string{
		{"user", "add", "root", "--new-user-password=" + authRootPass},
		{"role", "add", "jobs-producer"},
		{"role", "grant-permission", "jobs-producer", "write", "/q/jobs/p/", "--prefix"},
		{"role", "grant-permission", "jobs-producer", "write", "/q/jobs"},
		{"user", "add", "jobs-app", "--new-user-password=" + authProdPass},
		{"user", "grant-role", "jobs-app", "jobs-producer"},
		{"role", "add", "jobs-worker-1"},
		{"role", "grant-permission", "jobs-worker-1", "readwrite", "/q/jobs/c/worker-1"},
		{"role", "grant-permission", "jobs-worker-1", "write", "/q/jobs/c/worker-1/", "--prefix"},
		{"user", "add", "w1", "--new-user-password=" + authProdPass},
		{"user", "grant-role", "w1", "jobs-worker-1"},
		{"auth", "enable"},
	} {
		ctlOK(t, p, "", args...)
	}
	producer := authClient(t, p, "jobs-app", authProdPass)
	w1 := authClient(t, p, "w1", authProdPass)
	for _, m := range []string{"m1", "m2"} {
		ctx, cancel := rpcCtx()
		_, err := producer.Put(ctx, "/q/jobs/p/"+m, "v-"+m)
		cancel()
		if err != nil {
			t.Fatalf("jobs-app: put /q/jobs/p/%s: %v", m, err)
		}
	}

	requireWatchDenied(t, w1, "/q/jobs/c/worker-2")
	for _, d := range []deniedOp{
		{"put /q/jobs/p/m3", clientv3.OpPut("/q/jobs/p/m3", "v")},
		{"get /config/queues/jobs", clientv3.OpGet("/config/queues/jobs")},
		{"put /config/queues/jobs", clientv3.OpPut("/config/queues/jobs", `{"prefetch":1}`)},
	} {
		ctx, cancel := rpcCtx()
		_, err := w1.Do(ctx, d.op)
		cancel()
		requireDenied(t, "w1: "+d.what, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wch := w1.Watch(ctx, "/q/jobs/c/worker-1")
	seqs, keys := nextDeliveries(t, wch, 2)
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("deliveries: got %v, want m1 and m2 once each", keys)
	}
	for i, key := range keys {
		short := fmt.Sprintf("/q/jobs/%s/%s", seqs[i], key)
		own := fmt.Sprintf("/q/jobs/c/worker-1/%s/%s", seqs[i], key)
		rctx, rcancel := rpcCtx()
		_, err := w1.Delete(rctx, short)
		requireDenied(t, "w1: del "+short, err)
		resp, err := w1.Delete(rctx, own)
		rcancel()
		if err != nil || resp.Deleted != 1 {
			t.Fatalf("w1: del %s: got %v, %v; want 1 deleted", own, resp, err)
		}
	}
	waitDrained(t, "jobs", p)
	if q := mustQueueOn(t, p, "jobs"); q.Stats.Enqueued != 2 || q.Stats.Acked != 2 {
		t.Errorf("/status jobs: enqueued %d, acked %d; want 2, 2", q.Stats.Enqueued, q.Stats.Acked)
	}
}
