package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// statusTimeout bounds one read of a node's /status or /metrics.
const statusTimeout = 10 * time.Second

// nodeStatus is the part of a chute node's GET /status the bench reads.
type nodeStatus struct {
	Name     string         `json:"name"`
	MemberID string         `json:"member_id"`
	Members  []memberStatus `json:"members"`
	Queues   []queueStatus  `json:"queues"`
}

// memberStatus is a member as a node sees it.
type memberStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"` // "alive" when up
}

// queueStatus is what a node holds of a queue.
type queueStatus struct {
	Name       string `json:"name"`
	Dispatcher string `json:"dispatcher"` // member id
	Rows       int64  `json:"depth_rows"`
}

// alive counts the members the node sees alive.
func (s nodeStatus) alive() int {
	n := 0
	for _, m := range s.Members {
		if m.Status == "alive" {
			n++
		}
	}
	return n
}

// queue returns the queue called name; ok is false when the node holds
// nothing of it.
func (s nodeStatus) queue(name string) (queueStatus, bool) {
	for _, q := range s.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return queueStatus{}, false
}

// metricsGet reads http://<addr><path> from a node's metrics listener.
func metricsGet(ctx context.Context, addr, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: GET %s%s: %w", addr, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: GET %s%s: %w", addr, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: GET %s%s: %s", addr, path, resp.Status)
	}
	return body, nil
}

// fetchStatus reads GET /status of the node whose metrics listener is
// addr.
func fetchStatus(ctx context.Context, addr string) (nodeStatus, error) {
	body, err := metricsGet(ctx, addr, "/status")
	if err != nil {
		return nodeStatus{}, err
	}
	var s nodeStatus
	if err := json.Unmarshal(body, &s); err != nil {
		return nodeStatus{}, fmt.Errorf("bench: status of %s: %w", addr, err)
	}
	return s, nil
}

// fetchMetrics reads GET /metrics of the node whose metrics listener is
// addr and returns its samples without labels, by name.
func fetchMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	body, err := metricsGet(ctx, addr, "/metrics")
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body)), nil
}

// parseMetrics returns the samples without labels of a Prometheus text
// exposition, by name; comments, labelled samples and lines that do not
// parse are skipped.
func parseMetrics(text string) map[string]float64 {
	out := make(map[string]float64)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		out[fields[0]] = v
	}
	return out
}
