package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// defaultCompressionCells are the --clickhouse-compression values the
// compression cells compare unless told otherwise.
const defaultCompressionCells = "none,gzip"

// compressionServer labels the compression cell of codec: the chute node
// started with --clickhouse-compression=codec.
func compressionServer(codec string) string {
	return "chute, --clickhouse-compression=" + codec
}

// checkCompressionCells refuses a codec chute's --clickhouse-compression
// does not name, and a codec listed twice (its cells would share a label).
func checkCompressionCells(codecs []string) error {
	for i, c := range codecs {
		switch c {
		case "none", "gzip", "deflate", "zstd":
		default:
			return fmt.Errorf("compression %q, want none, gzip, deflate or zstd", c)
		}
		if slices.Contains(codecs[:i], c) {
			return fmt.Errorf("compression %q listed twice", c)
		}
	}
	return nil
}

// clickHouseUpstream parses a ClickHouse URL as chute takes it
// (http[s]://[user:pass@]host[:port], or host[:port] alone): the
// host:port a wire proxy forwards to, the port chute would default to
// when there is none, and the URL itself.
func clickHouseUpstream(chURL string) (upstream string, u *url.URL, err error) {
	raw := chURL
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	if u, err = url.Parse(raw); err != nil {
		return "", nil, fmt.Errorf("bench: clickhouse url: %w", err)
	}
	if u.Hostname() == "" {
		return "", nil, fmt.Errorf("bench: clickhouse url %q has no host", chURL)
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "http":
		port = "8123"
	case u.Scheme == "https":
		port = "8443"
	default:
		return "", nil, fmt.Errorf("bench: clickhouse url %q: scheme %q, want http or https", chURL, u.Scheme)
	}
	return net.JoinHostPort(u.Hostname(), port), u, nil
}

// throughProxy is the URL a node is given to reach the ClickHouse of u
// through the wire proxy at addr: u's scheme and user, the proxy's
// address, nothing else (chute ignores a path and a query).
func throughProxy(u *url.URL, addr string) string {
	node := url.URL{Scheme: u.Scheme, User: u.User, Host: addr}
	return node.String()
}

// compressionTarget is the chute node of codec's compression cell, on
// four free ports, keeping its data under data and inserting into
// nodeURL (the wire proxy) with --clickhouse-compression=codec.
func compressionTarget(mc matrixConfig, codec string, ports []int, data string, environ []string, nodeURL string) *target {
	t := chuteTarget(mc, "bench-"+codec, ports, data, childEnv(environ), nodeURL)
	t.argv = append(t.argv, "--clickhouse-compression", codec)
	t.name = compressionServer(codec)
	return t
}

// runCompressionGroup is the compression group of the ClickHouse plan:
// one chute node per codec of mc.compression, each started with
// --clickhouse-compression=codec and reaching ClickHouse through a wire
// proxy of its own in this process, all up for the whole group; one run
// of each (mk makes the cell of a node), in the order of mc.compression,
// reported through run with the proxy's counts (Result.Wire). The nodes
// are stopped, then the proxies, whatever the error.
func runCompressionGroup(ctx context.Context, mc matrixConfig, dir string, mk func(*target) cell, run func(cell) (Result, error), logger *slog.Logger) (err error) {
	ports, err := freePorts(4 * len(mc.compression))
	if err != nil {
		return err
	}
	data, err := groupDir(dir, "compression", logger)
	if err != nil {
		return err
	}
	defer data.remove()
	upstream, chURL, err := clickHouseUpstream(mc.clickhouseURL)
	if err != nil {
		return err
	}
	targets := make([]*target, len(mc.compression))
	proxies := make([]*wireProxy, len(mc.compression))
	// Deferred before the nodes' stop, so it runs after it: a node's
	// last insert ends before its proxy closes the connection.
	defer func() {
		for _, p := range proxies {
			if p != nil {
				err = errors.Join(err, p.stop())
			}
		}
	}()
	for i, codec := range mc.compression {
		p, err := startWireProxy(upstream, wireIdleTimeout)
		if err != nil {
			return err
		}
		proxies[i] = p
		targets[i] = compressionTarget(mc, codec, ports[4*i:4*i+4], data.path, os.Environ(), throughProxy(chURL, p.addr()))
		logger.Info("wire proxy serving", "server", targets[i].name, "listen", p.addr(), "upstream", upstream)
	}
	started, err := startTargets(ctx, mc, dir, targets, logger)
	defer stopTargets(started, logger)
	if err != nil {
		return err
	}
	for i, t := range targets {
		c := mk(t)
		c.wire, c.codec = proxies[i], mc.compression[i]
		if _, err := run(c); err != nil {
			return err
		}
	}
	return nil
}

// wireMeter measures what a compression cell's node sent through its
// wire proxy, and the CPU ClickHouse's query threads used, between its
// start and stop. It holds no goroutine.
type wireMeter struct {
	proxy *wireProxy
	codec string
	url   string // ClickHouse, straight
	sent  wireCounts
	ch    time.Duration
	chErr error // the start's ClickHouse CPU was not read
}

// startWire reads proxy's counts and ClickHouse's query CPU at url now,
// for the node started with --clickhouse-compression=codec.
func startWire(ctx context.Context, proxy *wireProxy, codec, url string) *wireMeter {
	m := &wireMeter{proxy: proxy, codec: codec, url: url, sent: proxy.counts()}
	m.ch, m.chErr = chQueryCPU(ctx, url)
	return m
}

// stop reads them again and returns the WireCount of run r, whose
// warmup made warmup puts. ClickHouse's CPU is left out, with a warning,
// when either read failed.
func (m *wireMeter) stop(ctx context.Context, r Result, warmup int, logger *slog.Logger) *WireCount {
	sent := m.proxy.counts().sub(m.sent)
	var chUsed time.Duration
	err := m.chErr
	if err == nil {
		var ch time.Duration
		if ch, err = chQueryCPU(ctx, m.url); err == nil {
			chUsed = ch - m.ch
		}
	}
	if err != nil {
		logger.Warn("clickhouse cpu not read", "compression", m.codec, "err", err)
	}
	return newWireCount(m.codec, sent, landedRows(r, warmup), r.CPU, chUsed)
}

// newWireCount is the WireCount of a run of rows that the proxy counted
// as sent, the node's CPU as cpu (the first node's is the node's) and
// ClickHouse's query threads as chUsed (zero: not known).
func newWireCount(codec string, sent wireCounts, rows int64, cpu []NodeCPU, chUsed time.Duration) *WireCount {
	w := &WireCount{Compression: codec, Rows: rows, BytesSent: sent.sent, BytesReceived: sent.received, Conns: sent.conns}
	if rows <= 0 {
		return w
	}
	w.BytesPerRow = float64(sent.sent) / float64(rows)
	if len(cpu) > 0 {
		w.NodeMicrosPerRow = cpu[0].Seconds * 1e6 / float64(rows)
	}
	w.ClickHouseMicrosPerRow = float64(chUsed.Microseconds()) / float64(rows)
	return w
}
