package nodeprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"chute/dispatch"
	"chute/internal/nodestatus"
)

// Status reads GET /status of the node whose metrics listener is addr.
func Status(ctx context.Context, c *http.Client, addr string) (nodestatus.Node, error) {
	body, err := get(ctx, c, nodeURL(addr, "/status"))
	if err != nil {
		return nodestatus.Node{}, fmt.Errorf("nodeprobe: status: %w", err)
	}
	var st nodestatus.Node
	if err := json.Unmarshal(body, &st); err != nil {
		return nodestatus.Node{}, fmt.Errorf("nodeprobe: status of %s: %w", addr, err)
	}
	return st, nil
}

// Queue returns the queue called name of st; ok is false when the node
// holds no state of it.
func Queue(st nodestatus.Node, name string) (q dispatch.QueueStatus, ok bool) {
	for _, q := range st.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return dispatch.QueueStatus{}, false
}

// Alive counts the members st's node sees alive, itself included.
func Alive(st nodestatus.Node) int {
	n := 0
	for _, m := range st.Members {
		if m.Status == "alive" {
			n++
		}
	}
	return n
}

// Backup returns the copies st's node keeps of queue's rows for other
// members, summed over their dispatchers.
func Backup(st nodestatus.Node, queue string) (rows int, bytes int64) {
	for _, b := range st.Backups {
		if b.Queue == queue {
			rows += b.Rows
			bytes += b.Bytes
		}
	}
	return rows, bytes
}
