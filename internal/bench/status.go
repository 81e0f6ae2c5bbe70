package bench

import (
	"context"
	"time"

	"chute/internal/nodeprobe"
	"chute/internal/nodestatus"
)

// statusTimeout bounds one read of a node's /status or /metrics.
const statusTimeout = 10 * time.Second

// fetchStatus reads GET /status of the node whose metrics listener is
// addr, within statusTimeout.
func fetchStatus(ctx context.Context, addr string) (nodestatus.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return nodeprobe.Status(ctx, httpClient, addr)
}

// fetchMetrics reads GET /metrics of the node whose metrics listener is
// addr, within statusTimeout.
func fetchMetrics(ctx context.Context, addr string) (nodeprobe.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return nodeprobe.ReadMetrics(ctx, httpClient, addr)
}
