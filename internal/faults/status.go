package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// NodeStatus is the part of a node's GET /status the fault tests read.
type NodeStatus struct {
	Name     string        `json:"name"`
	MemberID string        `json:"member_id"` // hex
	Queues   []QueueStatus `json:"queues"`
	// Backups are the copies this node keeps for queues other members
	// dispatch (ack=replicated); empty where the node has none.
	Backups []BackupStatus `json:"backups"`
}

// BackupStatus is what a node keeps of one queue as another member's
// backup.
type BackupStatus struct {
	Queue      string `json:"queue"`
	Dispatcher string `json:"dispatcher"` // member id, hex
	Rows       int    `json:"rows"`
	Bytes      int64  `json:"bytes"`
}

// Backup returns the copies the node keeps of queue's rows for other
// members, summed over dispatchers: rows and bytes.
func (s NodeStatus) Backup(queue string) (rows int, bytes int64) {
	for _, b := range s.Backups {
		if b.Queue == queue {
			rows += b.Rows
			bytes += b.Bytes
		}
	}
	return rows, bytes
}

// QueueStatus is one queue of NodeStatus: what this node holds of it.
type QueueStatus struct {
	Name       string `json:"name"`
	Dispatcher string `json:"dispatcher"` // member id, hex
	Epoch      uint64 `json:"epoch"`
	Rows       int    `json:"depth_rows"`
	Held       int    `json:"held_copies"`
	Bytes      int64  `json:"depth_bytes"`
	Unacked    int    `json:"unacked"`
}

// Queue returns the queue called name; ok is false when the node holds no
// state of it.
func (s NodeStatus) Queue(name string) (q QueueStatus, ok bool) {
	for _, q := range s.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return QueueStatus{}, false
}

// statusClient has no timeout of its own: callers bound their calls with
// their context.
var statusClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// FetchStatus reads GET /status from a node's metrics listener
// (host:port).
func FetchStatus(ctx context.Context, metricsAddr string) (NodeStatus, error) {
	body, err := get(ctx, "http://"+metricsAddr+"/status")
	if err != nil {
		return NodeStatus{}, fmt.Errorf("faults: status: %w", err)
	}
	var st NodeStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return NodeStatus{}, fmt.Errorf("faults: status of %s: %w", metricsAddr, err)
	}
	return st, nil
}

// FetchMetric reads GET /metrics (Prometheus text) from a node's metrics
// listener and returns the sum of the samples of the metric called name
// over all its label sets, such as process_resident_memory_bytes or
// chute_queue_depth_bytes; ok is false when there is none.
func FetchMetric(ctx context.Context, metricsAddr, name string) (sum float64, ok bool, err error) {
	body, err := get(ctx, "http://"+metricsAddr+"/metrics")
	if err != nil {
		return 0, false, fmt.Errorf("faults: metrics: %w", err)
	}
	return sumMetric(string(body), name)
}

// sumMetric sums the samples of name in a Prometheus text exposition.
func sumMetric(text, name string) (float64, bool, error) {
	var sum float64
	var ok bool
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		metric, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			metric, rest = line[:i], line[i:]
		}
		if metric != name {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndex(rest, "}")
			if j < 0 {
				return 0, false, fmt.Errorf("faults: metrics: line %q: labels not closed", line)
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false, fmt.Errorf("faults: metrics: line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("faults: metrics: line %q: %w", line, err)
		}
		sum += v
		ok = true
	}
	return sum, ok, sc.Err()
}
