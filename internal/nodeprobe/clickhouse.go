package nodeprobe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxShownSQL bounds how much of a statement an error repeats.
const maxShownSQL = 200

// Query runs one statement over ClickHouse's HTTP interface at chURL
// (http://[user:pass@]host:port) and returns the body of a 200 answer,
// TabSeparated unless the statement says FORMAT. An INSERT may carry its
// rows after the statement, on the next line.
func Query(ctx context.Context, c *http.Client, chURL, sql string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(chURL, "/")+"/", strings.NewReader(sql))
	if err != nil {
		return "", fmt.Errorf("nodeprobe: clickhouse: %s: %w", shorten(sql), err)
	}
	resp, err := clientOr(c).Do(req)
	if err != nil {
		return "", fmt.Errorf("nodeprobe: clickhouse: %s: %w", shorten(sql), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("nodeprobe: clickhouse: %s: read: %w", shorten(sql), err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("nodeprobe: clickhouse: %s: HTTP %d: %s", shorten(sql), resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// shorten is sql cut to maxShownSQL bytes, for error messages.
func shorten(sql string) string {
	sql = strings.TrimSpace(sql)
	if len(sql) > maxShownSQL {
		return fmt.Sprintf("%s... (%d bytes)", sql[:maxShownSQL], len(sql))
	}
	return sql
}
