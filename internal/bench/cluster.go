package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// dataDir is the directory under which one group of the matrix keeps its
// nodes' data: a fresh one per group, so a node never starts on the state
// of an earlier group's node of the same name.
type dataDir struct {
	path   string
	logger *slog.Logger
}

// groupDir makes a fresh data directory for the group called name under
// dir.
func groupDir(dir, name string, logger *slog.Logger) (dataDir, error) {
	p, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return dataDir{}, fmt.Errorf("bench: data directory of %s: %w", name, err)
	}
	return dataDir{path: p, logger: logger}, nil
}

// remove deletes the directory; call it once the group's children are
// gone.
func (d dataDir) remove() {
	if err := os.RemoveAll(d.path); err != nil {
		d.logger.Warn("cannot remove data directory", "dir", d.path, "err", err)
	}
}

// startCluster starts the three chute nodes of clusterTargets with their
// data in a fresh directory under dir, and waits until every node answers
// a put, sees the other two alive and is ready (/readyz 200: it knows the
// raft leader and applied the log). stop stops the nodes and removes their
// data; call it whatever the error.
func startCluster(ctx context.Context, mc matrixConfig, dir, name string, logger *slog.Logger) (nodes []*target, stop func(), err error) {
	stop = func() {}
	ports, err := freePorts(12)
	if err != nil {
		return nil, stop, err
	}
	data, err := groupDir(dir, name, logger)
	if err != nil {
		return nil, stop, err
	}
	nodes = clusterTargets(mc, ports, data.path, os.Environ())
	started, err := startTargets(ctx, mc, dir, nodes, logger)
	stop = func() {
		stopTargets(started, logger)
		data.remove()
	}
	if err != nil {
		return nil, stop, err
	}
	if err := waitMembers(ctx, nodes, mc.readyTimeout); err != nil {
		return nil, stop, err
	}
	if err := waitReadyz(ctx, nodes, mc.readyTimeout); err != nil {
		return nil, stop, err
	}
	return nodes, stop, nil
}

// waitReadyz polls GET /readyz of every node until each answers 200,
// within timeout. Its error quotes the node's last answer: a request the
// deadline cut short replaces an answer only when there was none.
func waitReadyz(ctx context.Context, nodes []*target, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, t := range nodes {
		var lastCode int
		var lastBody string
		var lastErr error
		for {
			code, body, err := getReadyz(wctx, t.metrics)
			if err == nil && code == http.StatusOK {
				break
			}
			if wctx.Err() == nil || (lastCode == 0 && lastErr == nil) {
				lastCode, lastBody, lastErr = code, body, err
			}
			if !sleepUntil(wctx, time.Now().Add(readyPoll)) {
				return fmt.Errorf("bench: %s is not ready within %v (last: %d %q, %v)", t.name, timeout, lastCode, lastBody, lastErr)
			}
		}
	}
	return nil
}

// getReadyz reads GET /readyz of the node whose metrics listener is addr:
// its status code and the start of its body.
func getReadyz(ctx context.Context, addr string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	return resp.StatusCode, string(b), err
}
