package nodeprobe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// clientOr returns c, or a client without keep-alive when c is nil.
func clientOr(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// nodeURL is path on the node whose metrics listener is addr.
func nodeURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + path
}

// get returns the body of a 200 answer to GET url.
func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := clientOr(c).Do(req)
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
