//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// What etcdctl 3.4 cannot ask (count_only, min/max revisions) is compared
// with the Go client, the same way: the same calls against etcd and chute,
// ids and raft terms zeroed, the rest identical.

// newClient returns a clientv3 client of p, closed when the test ends.
func newClient(t *testing.T, p *Proc) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{p.ClientAddr},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3 %s: %v", p, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// getTranscript runs puts then each get against p and returns one line
// per get: its options' name and the response as JSON, header ids zeroed.
func getTranscript(t *testing.T, p *Proc, puts []string, gets []namedGet) string {
	t.Helper()
	cli := newClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i+1 < len(puts); i += 2 {
		if _, err := cli.Put(ctx, puts[i], puts[i+1]); err != nil {
			t.Fatalf("%s: put %s: %v", p, puts[i], err)
		}
	}
	var b strings.Builder
	for _, g := range gets {
		resp, err := cli.Get(ctx, g.key, g.opts...)
		if err != nil {
			fmt.Fprintf(&b, "%s: error %v\n", g.name, err)
			continue
		}
		resp.Header.ClusterId, resp.Header.MemberId, resp.Header.RaftTerm = 0, 0, 0
		js, err := json.Marshal(resp)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		fmt.Fprintf(&b, "%s: %s\n", g.name, js)
	}
	return b.String()
}

type namedGet struct {
	name string
	key  string
	opts []clientv3.OpOption
}

func compareGets(t *testing.T, puts []string, gets []namedGet) {
	t.Helper()
	etcd := StartEtcd(t)
	chute := StartChute(t, "--name", "default")
	requireSameTranscript(t, getTranscript(t, etcd, puts, gets), getTranscript(t, chute, puts, gets))
}

func TestClientv3_get_countOnly(t *testing.T) {
	t.Parallel()
	compareGets(t, []string{"a", "1", "b", "2", "b", "3", "c", "4"}, []namedGet{
		{"prefix", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}},
		{"key", "b", []clientv3.OpOption{clientv3.WithCountOnly()}},
		{"missing", "z", []clientv3.OpOption{clientv3.WithCountOnly()}},
		{"range", "a", []clientv3.OpOption{clientv3.WithRange("c"), clientv3.WithCountOnly()}},
		{"limit", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithLimit(1)}},
		{"rev", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(3)}},
		{"fromKey", "b", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithCountOnly()}},
	})
}

func TestClientv3_get_revisionFilters(t *testing.T) {
	t.Parallel()
	// a: create 2, mod 6; b: create 3, mod 3; c: create 4, mod 5.
	compareGets(t, []string{"a", "1", "b", "1", "c", "1", "c", "2", "a", "2"}, []namedGet{
		{"minMod4", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(4)}},
		{"maxMod5", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxModRev(5)}},
		{"minCreate3", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinCreateRev(3)}},
		{"maxCreate3", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(3)}},
		{"minMod4Count", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(4), clientv3.WithCountOnly()}},
		{"minMod4Limit1", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(4), clientv3.WithLimit(1)}},
		{"maxMod5Rev4", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxModRev(5), clientv3.WithRev(4)}},
		{"serializable", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSerializable()}},
	})
}

// watchTranscript makes the writes of TestClientv3_watch_filters against
// p, then watches from revision 2 with each option set and returns one line
// per response: the options' name, the header revision, flags and events.
func watchTranscript(t *testing.T, p *Proc, watches []namedWatch) string {
	t.Helper()
	cli := newClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ops := []clientv3.Op{
		clientv3.OpPut("w/a", "1"), clientv3.OpPut("w/b", "1"), clientv3.OpPut("w/a", "2"),
		clientv3.OpDelete("w/b"), clientv3.OpPut("x", "1"), clientv3.OpDelete("w/", clientv3.WithPrefix()),
	}
	for _, op := range ops {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	var b strings.Builder
	for _, w := range watches {
		wctx, wcancel := context.WithTimeout(ctx, watchTimeout)
		events := 0
		for resp := range cli.Watch(clientv3.WithRequireLeader(wctx), "w/", append(w.opts, clientv3.WithPrefix())...) {
			fmt.Fprintf(&b, "%s: revision %d created %v canceled %v compact %d err %v\n",
				w.name, resp.Header.Revision, resp.Created, resp.Canceled, resp.CompactRevision, resp.Err())
			for _, ev := range resp.Events {
				js, _ := json.Marshal(ev)
				fmt.Fprintf(&b, "  %s\n", js)
			}
			events += len(resp.Events)
			if events >= w.events || resp.Canceled {
				break
			}
		}
		if events < w.events {
			fmt.Fprintf(&b, "%s: %d events within %v, want %d\n", w.name, events, watchTimeout, w.events)
		}
		wcancel()
	}
	return b.String()
}

type namedWatch struct {
	name   string
	opts   []clientv3.OpOption
	events int // the watch ends once it has seen this many
}

func TestClientv3_watch_filters(t *testing.T) {
	t.Parallel()
	watches := []namedWatch{
		{"all", []clientv3.OpOption{clientv3.WithRev(2)}, 5},
		{"noPut", []clientv3.OpOption{clientv3.WithRev(2), clientv3.WithFilterPut()}, 2},
		{"noDelete", []clientv3.OpOption{clientv3.WithRev(2), clientv3.WithFilterDelete()}, 3},
		{"prevKV", []clientv3.OpOption{clientv3.WithRev(3), clientv3.WithPrevKV()}, 4},
		{"createdNotify", []clientv3.OpOption{clientv3.WithRev(5), clientv3.WithCreatedNotify()}, 1},
	}
	etcd := StartEtcd(t)
	chute := StartChute(t, "--name", "default")
	requireSameTranscript(t, watchTranscript(t, etcd, watches), watchTranscript(t, chute, watches))
}

// progressTranscript makes three writes against p, watches from the next
// revision, asks for a progress notification and returns what it got.
func progressTranscript(t *testing.T, p *Proc) string {
	t.Helper()
	cli := newClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := cli.Put(ctx, k, "v"); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	var b strings.Builder
	wch := cli.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithRev(5), clientv3.WithCreatedNotify())
	for resp := range wch {
		fmt.Fprintf(&b, "revision %d created %v progress %v events %d err %v\n",
			resp.Header.Revision, resp.Created, resp.IsProgressNotify(), len(resp.Events), resp.Err())
		if resp.IsProgressNotify() || resp.Err() != nil {
			break
		}
		if resp.Created {
			if err := cli.RequestProgress(ctx); err != nil {
				fmt.Fprintf(&b, "request progress: %v\n", err)
				break
			}
		}
	}
	return b.String()
}

func TestClientv3_watch_requestProgress(t *testing.T) {
	t.Parallel()
	etcd := StartEtcd(t)
	chute := StartChute(t, "--name", "default")
	requireSameTranscript(t, progressTranscript(t, etcd), progressTranscript(t, chute))
}
