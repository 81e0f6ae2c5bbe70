//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/faults"
)

// Bounds of the watches of the linearizability scenarios.
const (
	linWatchCatchUp = 30 * time.Second       // for every watch to reach the store's revision once the clients stopped
	linWatchSettle  = 500 * time.Millisecond // the revision holding still this long counts as the last
)

// linWatch is one watch of the register workload's keys from revision
// 1, through its own client, recording every event as it comes.
type linWatch struct {
	name string

	mu     sync.Mutex // guards events and err
	events []faults.WatchEvent
	err    error // why the watch ended before it was cancelled
}

// linWatches watches the workload's keys through each node alone and
// through all three, as clients that stay on a frozen, killed or cut-off
// node and clients that move do.
type linWatches struct {
	all    []*linWatch
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLinWatches starts the watches on nodes (three); they run until
// stop, which the test's cleanup calls too.
func startLinWatches(t *testing.T, nodes []*Proc) *linWatches {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws := &linWatches{cancel: cancel}
	t.Cleanup(ws.stop)
	endpoints := make([][]string, 0, len(nodes)+1)
	names := make([]string, 0, len(nodes)+1)
	var every []string
	for _, p := range nodes {
		endpoints = append(endpoints, []string{p.ClientAddr})
		names = append(names, p.Name)
		every = append(every, p.ClientAddr)
	}
	endpoints = append(endpoints, every)
	names = append(names, "every node")
	for i, eps := range endpoints {
		w := &linWatch{name: names[i]}
		ws.all = append(ws.all, w)
		wch := clusterClient(t, eps...).Watch(ctx, "/lin/", clientv3.WithPrefix(), clientv3.WithRev(1))
		ws.wg.Go(func() { w.record(wch) })
	}
	return ws
}

// record appends wch's events until it closes, which cancelling its
// context does; a watch that ends otherwise (compacted, cancelled by the
// server) records why.
func (w *linWatch) record(wch clientv3.WatchChan) {
	for resp := range wch {
		w.mu.Lock()
		if err := resp.Err(); err != nil && w.err == nil {
			w.err = err
		}
		for _, e := range resp.Events {
			w.events = append(w.events, faults.WatchEvent{
				Key: string(e.Kv.Key), Value: string(e.Kv.Value), Delete: e.Type == mvccpb.DELETE,
				ModRevision: e.Kv.ModRevision, CreateRevision: e.Kv.CreateRevision, Version: e.Kv.Version,
			})
		}
		w.mu.Unlock()
	}
}

// at returns the revision of the last event w received, and why it
// ended if it did.
func (w *linWatch) at() (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 {
		return 0, w.err
	}
	return w.events[len(w.events)-1].ModRevision, w.err
}

// stop cancels the watches and waits for them; it may be called again.
func (ws *linWatches) stop() {
	ws.cancel()
	ws.wg.Wait()
}

// catchUp waits, once the clients stopped, until the store's revision
// (read through cli) holds still and every watch reached it, and
// returns it. A write that timed out may still apply meanwhile, hence
// the settling. It fails the test after linWatchCatchUp.
func (ws *linWatches) catchUp(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	deadline := time.Now().Add(linWatchCatchUp)
	var last int64
	var since time.Time
	var behind string
	for {
		ctx, cancel := rpcCtx()
		resp, err := cli.Get(ctx, "/lin/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		behind = ""
		if err != nil {
			behind = fmt.Sprintf("store's revision: %v", err)
		} else if resp.Header.Revision != last {
			last, since = resp.Header.Revision, time.Now()
		}
		for _, w := range ws.all {
			rev, werr := w.at()
			if werr != nil {
				t.Fatalf("watch through %s ended at revision %d: %v", w.name, rev, werr)
			}
			if rev != last && behind == "" {
				behind = fmt.Sprintf("watch through %s at revision %d of %d", w.name, rev, last)
			}
		}
		if behind == "" && time.Since(since) >= linWatchSettle {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("watches not caught up within %v: %s", linWatchCatchUp, behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streams stops the watches and returns what each received.
func (ws *linWatches) streams() [][]faults.WatchEvent {
	ws.stop()
	out := make([][]faults.WatchEvent, len(ws.all))
	for i, w := range ws.all {
		out[i] = w.events
	}
	return out
}
