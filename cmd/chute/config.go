package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/credentials"

	"chute/dispatch"
	"chute/gossip"
	"chute/gossip/peer"
	"chute/internal/setting"
	"chute/internal/tlsfiles"
	"chute/kv"
	"chute/kv/raftnode"
	chuteotel "chute/otel"
	"chute/sink"
)

// Config is everything a node needs to start. loadConfig builds it from the
// command line, the environment and the YAML file; tests build it from
// DefaultConfig. Nothing in it reads flags, env or files by itself.
type Config struct {
	// Name is the node's name, unique in the cluster; the member id is a
	// stable 64-bit hash of it. Default: the host name. Empty is invalid.
	Name string

	// Cluster is the cluster's name; gossip from another cluster is refused
	// and the cluster id is a hash of it. Default "chute". Empty is invalid.
	Cluster string

	// ListenClientURLs are the etcd API listeners, all bound: http or https
	// URLs with a host:port and no path. Default http://127.0.0.1:2379.
	// Empty is invalid.
	ListenClientURLs []string

	// AdvertiseClientURLs are the client URLs this node reports in
	// MemberList. Empty means ListenClientURLs; loadConfig fills that in.
	AdvertiseClientURLs []string

	// ListenPeerURLs are the node-to-node gRPC listeners, never the client
	// port. Default http://127.0.0.1:2380. Empty is invalid.
	ListenPeerURLs []string

	// AdvertisePeerURLs are the peer URLs sent to other nodes in serf tags.
	// Empty means ListenPeerURLs; loadConfig fills that in.
	AdvertisePeerURLs []string

	// GossipListen is serf's bind address, host:port, TCP and UDP.
	// Default 127.0.0.1:7946. Empty is invalid.
	GossipListen string

	// GossipAdvertise is the host:port other nodes use to gossip with this
	// one. Empty means GossipListen; loadConfig fills that in.
	GossipAdvertise string

	// Join lists gossip seeds as host:port (DNS names allowed), retried with
	// backoff until one answers. Empty: start a cluster of one and wait for
	// others to join.
	Join []string

	// GossipKey is a base64 AES key, 16, 24 or 32 bytes once decoded, that
	// encrypts gossip. Empty: gossip is not encrypted.
	GossipKey string

	// ClickHouseURL is ClickHouse's HTTP interface,
	// http[s]://[user:pass@]host[:port], or a comma-separated list of
	// such URLs (a YAML list in the file): batches go round-robin over
	// the servers that are up (sink.ParseURLs, sink.Servers). It may hold
	// passwords: never log it whole. Empty: ClickHouse queues keep their
	// rows queued.
	ClickHouseURL string

	// ClickHouseSettings are ClickHouse settings sent with every INSERT,
	// "name=value,name=value" (a YAML mapping in the file), as
	// sink.ParseSettingsText reads them; a queue's "settings" override
	// them by name. Empty: none.
	ClickHouseSettings string

	// ClickHouseCompression compresses INSERT bodies: auto, none, gzip,
	// deflate, zstd or lz4 (sink.ParseCompression). Default auto
	// (sink.DefaultCompression): none to a server on a loopback address,
	// gzip to any other. Empty is none.
	ClickHouseCompression string

	// ClickHouseDB is the database for ch: queue names without a "db." part.
	// Default "default". Empty is invalid.
	ClickHouseDB string

	// ClickHouseCAFile is a PEM bundle of the CAs that verify ClickHouse's
	// certificate on an https ClickHouseURL; read at start and at every
	// reload. Empty: the system's roots.
	ClickHouseCAFile string

	// ClickHouseCertFile and ClickHouseKeyFile are the PEM client
	// certificate and key shown to ClickHouse over https, both or
	// neither; read at start and at every reload. Empty: no client
	// certificate.
	ClickHouseCertFile, ClickHouseKeyFile string

	// ClickHouseServerName is the name ClickHouse's certificate must hold,
	// instead of ClickHouseURL's host. Empty: the URL's host.
	ClickHouseServerName string

	// ClickHouseAllowTables are the tables puts to ClickHouse queues may
	// reach: db.table globs (see sink.AllowList), ClickHouse's system
	// databases only when a pattern names them outright; re-read at
	// every reload. Empty: every table outside the system databases.
	ClickHouseAllowTables []string

	// ClickHouseBatchInterval, ClickHouseMaxInsertsPerSecond and
	// ClickHouseMaxInflightInserts are the batch_interval,
	// max_inserts_per_second and max_inflight_inserts of every ClickHouse
	// queue whose settings do not name them (docs/clickhouse.md
	// "Batching"). Defaults 50ms, 2 and 2; zero is invalid.
	ClickHouseBatchInterval       time.Duration
	ClickHouseMaxInsertsPerSecond float64
	ClickHouseMaxInflightInserts  int

	// ClickHouseTimeout bounds one insert request (dispatch's
	// Config.InsertTimeout); a queue whose request timed out waits up to
	// 8 times longer. Default 30s; zero is invalid.
	ClickHouseTimeout time.Duration

	// MetricsMaxTables bounds the table label values of the ClickHouse
	// metrics; tables past it share table="_other". Default 1000. Zero
	// is invalid.
	MetricsMaxTables int

	// MetricsListen is the host:port of the HTTP server for /metrics,
	// /healthz, /readyz and /status. Default 127.0.0.1:9379. Empty: no such
	// server.
	MetricsListen string

	// ListenMetricsURLs are etcd's --listen-metrics-urls: each serves
	// /metrics and etcd's /health (with /livez and /readyz), and nothing
	// else, so that a Prometheus job and a health check written for etcd
	// find them. https:// ones use the client certificate, as etcd's do.
	ListenMetricsURLs []string

	// ConfigFile is the YAML file the configuration was read from, re-read
	// on SIGHUP. Empty: no file.
	ConfigFile string

	// LogLevel is the lowest level logged: slog.LevelDebug, LevelInfo,
	// LevelWarn or LevelError. The zero value is slog.LevelInfo.
	LogLevel slog.Level

	// MaxRequestBytes is the largest client request accepted, in bytes
	// (etcd's --max-request-bytes). Default 1572864. Zero is invalid.
	MaxRequestBytes int

	// MaxTxnOps is the most operations one Txn may hold (etcd's
	// --max-txn-ops). Default 128. Zero is invalid.
	MaxTxnOps int

	// MaxKeyBytes is the longest key accepted, in bytes. Default 1024. Zero
	// is invalid.
	MaxKeyBytes int

	// MaxConcurrentStreams bounds the calls one client connection may
	// have open at once (etcd's --max-concurrent-streams), 1 to
	// 4294967295. Default 4294967295.
	MaxConcurrentStreams int64

	// GRPCKeepaliveMinTime, GRPCKeepaliveInterval and
	// GRPCKeepaliveTimeout are etcd's --grpc-keepalive-*: the least time
	// between a client's pings (default 1s, etcd's 5s), the silence after
	// which the server pings a connection (2h) and the wait for its answer
	// before the connection is closed (20s). Zero is invalid.
	GRPCKeepaliveMinTime, GRPCKeepaliveInterval, GRPCKeepaliveTimeout time.Duration

	// HistoryRevisions is how many revisions of history the KV keeps at
	// least; older ones are compacted automatically. Default 100000.
	// Zero: never compact automatically.
	HistoryRevisions int64

	// AuthToken is etcd's --auth-token: "simple" (chute's signed tokens,
	// valid on every member; kv/doc.go) or etcd's "jwt,pub-key=<file>,
	// priv-key=<file>,sign-method=<alg>[,ttl=<duration>]" (the same key
	// files on every member). Default "simple".
	AuthToken string

	// BcryptCost is the cost of password hashes (etcd's --bcrypt-cost,
	// 4 to 31). Default 10. Zero is invalid.
	BcryptCost int

	// AuthTokenTTL is how many seconds a token is valid (etcd's
	// --auth-token-ttl). Default 300. Zero is invalid.
	AuthTokenTTL int

	// GossipProfile picks serf's timings: "lan" (memberlist's LAN defaults:
	// a failed node is detected in a few seconds) or "fast" (for tests on
	// one machine: about a second). Default "lan". Empty is invalid.
	GossipProfile string

	// ClientTLS are the certificate files of the https:// client URLs, with
	// etcd's flags: --cert-file, --key-file, --trusted-ca-file,
	// --client-cert-auth, --client-crl-file, --client-cert-allowed-hostname.
	// Zero: no certificate; an https:// client URL then needs AutoTLS.
	ClientTLS tlsfiles.Files

	// AutoTLS serves the https:// client URLs with a certificate made at
	// start, signed by itself (etcd's --auto-tls). Zero: off.
	AutoTLS bool

	// PeerTLS are the certificate files of the peer link, with etcd's
	// --peer-* flags. Zero: no certificate; the peer link is TLS derived
	// from GossipKey when there is one, else plain text.
	PeerTLS tlsfiles.Files

	// PeerAutoTLS secures the peer link with a certificate made at start:
	// derived from GossipKey when there is one (members authenticate each
	// other), else self-signed (encrypted, not authenticated), as etcd's
	// --peer-auto-tls. Zero: off.
	PeerAutoTLS bool

	// SelfSignedCertValidity is how many years the certificates of AutoTLS
	// and PeerAutoTLS are valid. Default 1. Zero is invalid.
	SelfSignedCertValidity int

	// TLSMinVersion and TLSMaxVersion bound the TLS versions of every
	// listener and dialer: TLS1.2 or TLS1.3. Empty: TLS1.2 and the newest.
	TLSMinVersion, TLSMaxVersion string

	// CipherSuites are the TLS 1.2 cipher suites offered, IANA names.
	// Empty: Go's defaults.
	CipherSuites []string

	// MetricsCertFile and MetricsKeyFile make MetricsListen serve HTTPS.
	// Empty: plain HTTP.
	MetricsCertFile, MetricsKeyFile string

	// DataDir holds everything the node stores: the raft log, stable
	// store and snapshots of the key space (etcd's --data-dir), and the
	// queue log. Empty
	// means Name + ".chute" in the working directory, as etcd's is
	// Name + ".etcd"; loadConfig fills that in.
	DataDir string

	// ListenClientHTTPURLs serve etcd's JSON gateway alone (etcd's
	// --listen-client-http-urls); then ListenClientURLs serve gRPC alone.
	ListenClientHTTPURLs []string

	// EnableGRPCGateway serves etcd's JSON gateway (POST /v3/kv/put, ...)
	// on the client URLs beside gRPC (etcd's --enable-grpc-gateway, on by
	// default as in etcd).
	EnableGRPCGateway bool

	// UnsafeNoFsync writes the queue log under DataDir without ever
	// fsyncing it (etcd's --unsafe-no-fsync): an acknowledged put
	// survives the process being killed, not the machine crashing.
	// Logged at start as unsafe. False: a put returns after its fsync.
	UnsafeNoFsync bool

	// QuotaBackendBytes bounds the queue log under DataDir (etcd's
	// --quota-backend-bytes, which bounds etcd's backend): a put that
	// would pass it fails with "etcdserver: mvcc: database space
	// exceeded". Zero: no quota.
	QuotaBackendBytes int64

	// BootstrapExpect is how many members, each with no raft state and
	// this same setting, bootstrap a new cluster together once they see
	// each other. Default 1: a node alone, without seeds, starts a
	// cluster of one. Zero is invalid.
	BootstrapExpect int

	// RaftVoters is how many members vote in raft; the leader adds the
	// others as non-voters, which serve reads and forward writes. Odd.
	// Default 3. Zero is invalid.
	RaftVoters int

	// DeadServerGrace is how long a member may be failed before the
	// leader removes it from raft and promotes a non-voter in its place.
	// Default one minute. Zero is invalid.
	DeadServerGrace time.Duration

	// ForceNewCluster starts this node's raft anew as a cluster of one
	// with its own log and key space, forgetting the other members (etcd's
	// --force-new-cluster): the recovery of a cluster that lost its
	// majority for good. Others then join it afresh. Zero: off.
	ForceNewCluster bool

	// Telemetry is read from the standard OTEL_* environment variables
	// only: service name, resource attributes, where spans go.
	// Zero: service.name chute, no tracing.
	Telemetry chuteotel.Config
}

// DefaultConfig returns the documented defaults (docs/operations.md). Name is the host name, or
// empty (and so invalid) when the host name cannot be read. The advertise
// fields are empty, meaning "the listen value".
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:              host,
		Cluster:           "chute",
		ListenClientURLs:  []string{"http://127.0.0.1:2379"},
		ListenPeerURLs:    []string{"http://127.0.0.1:2380"},
		GossipListen:      "127.0.0.1:7946",
		ClickHouseDB:      "default",
		MetricsListen:     "127.0.0.1:9379",
		MetricsMaxTables:  1000,
		LogLevel:          slog.LevelInfo,
		MaxRequestBytes:   1572864,
		EnableGRPCGateway: true,
		MaxTxnOps:         128,
		MaxKeyBytes:       1024,

		MaxConcurrentStreams:  math.MaxUint32,
		GRPCKeepaliveMinTime:  time.Second,
		GRPCKeepaliveInterval: 2 * time.Hour,
		GRPCKeepaliveTimeout:  20 * time.Second,
		HistoryRevisions:      100000,
		AuthToken:             "simple",
		BcryptCost:            kv.DefaultBcryptCost,
		AuthTokenTTL:          int(kv.DefaultAuthTokenTTL / time.Second),
		GossipProfile:         "lan",
		BootstrapExpect:       1,
		RaftVoters:            3,
		DeadServerGrace:       time.Minute,

		SelfSignedCertValidity: 1,
		ClickHouseCompression:  sink.DefaultCompression.String(),

		ClickHouseBatchInterval:       50 * time.Millisecond,
		ClickHouseTimeout:             30 * time.Second,
		ClickHouseMaxInsertsPerSecond: 2,
		ClickHouseMaxInflightInserts:  2,
	}
}

// fillAdvertise sets each empty advertise field to its listen value, and
// an empty data dir to its default.
func (c *Config) fillAdvertise() {
	if c.DataDir == "" && c.Name != "" {
		c.DataDir = c.dataDir()
	}
	if len(c.AdvertiseClientURLs) == 0 {
		c.AdvertiseClientURLs = slices.Clone(c.ListenClientURLs)
	}
	if len(c.AdvertisePeerURLs) == 0 {
		c.AdvertisePeerURLs = slices.Clone(c.ListenPeerURLs)
	}
	if c.GossipAdvertise == "" {
		c.GossipAdvertise = c.GossipListen
	}
}

// Validate reports every invalid field, each named by its flag. The
// packages own the rules of their settings: Validate builds their
// configurations from c, as newNode does, calls their Validate and names
// the flag of each field at fault. It checks itself only what no package
// sees: required flags, the zero that a flag refuses where a package reads
// it as "the default", flags that need other flags, and the settings of
// cmd alone. Its errors never contain the gossip key or the ClickHouse
// URL, which may hold secrets.
func (c Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: "+format, append([]any{flagName}, args...)...))
	}
	if len(c.ListenClientURLs) == 0 {
		bad("listen-client-urls", "at least one URL is required")
	}
	if len(c.ListenPeerURLs) == 0 {
		bad("listen-peer-urls", "at least one URL is required")
	}
	// Clients and peers dial the advertise URLs given: port 0 cannot be
	// dialed. kv accepts it, for the copies fillAdvertise makes of listen
	// URLs with port 0.
	for _, l := range []struct {
		flag string
		urls []string
	}{{"advertise-client-urls", c.AdvertiseClientURLs}, {"advertise-peer-urls", c.AdvertisePeerURLs}} {
		for _, raw := range l.urls {
			if u, err := url.Parse(raw); err == nil && u.Port() == "0" {
				bad(l.flag, "%q: port 0: others cannot dial it, want 1-65535", u.Redacted())
			}
		}
	}
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			bad("metrics-listen", "%q: %v", c.MetricsListen, err)
		}
	}
	for _, raw := range c.ListenMetricsURLs {
		if _, err := setting.CheckURL(raw); err != nil {
			bad("listen-metrics-urls", "%v", err)
		}
	}
	switch c.LogLevel {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
	default:
		bad("log-level", "%v is not one of debug, info, warn, error", c.LogLevel)
	}
	// kv and dispatch read zero as their default; these flags have no
	// such meaning, and negative values are the packages' to refuse.
	for _, n := range []struct {
		flag string
		v    int
	}{{"max-request-bytes", c.MaxRequestBytes}, {"max-txn-ops", c.MaxTxnOps}, {"max-key-bytes", c.MaxKeyBytes},
		{"bootstrap-expect", c.BootstrapExpect}, {"raft-voters", c.RaftVoters}, {"metrics-max-tables", c.MetricsMaxTables},
		{"bcrypt-cost", c.BcryptCost}, {"auth-token-ttl", c.AuthTokenTTL},
		{"clickhouse-max-inflight-inserts", c.ClickHouseMaxInflightInserts}} {
		if n.v == 0 {
			bad(n.flag, "0 is not positive")
		}
	}
	if c.DeadServerGrace == 0 {
		bad("raft-dead-server-grace", "0 is not positive")
	}
	if c.MaxConcurrentStreams < 1 || c.MaxConcurrentStreams > math.MaxUint32 {
		bad("max-concurrent-streams", "%d is outside 1..%d", c.MaxConcurrentStreams, uint32(math.MaxUint32))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"grpc-keepalive-min-time", c.GRPCKeepaliveMinTime}, {"grpc-keepalive-interval", c.GRPCKeepaliveInterval}, {"grpc-keepalive-timeout", c.GRPCKeepaliveTimeout}} {
		if d.v <= 0 {
			bad(d.flag, "%v is not positive", d.v)
		}
	}
	if c.ClickHouseBatchInterval == 0 {
		bad("clickhouse-batch-interval", "0 is not positive")
	}
	if c.ClickHouseTimeout <= 0 {
		bad("clickhouse-timeout", "%v is not positive", c.ClickHouseTimeout)
	}
	if c.ClickHouseMaxInsertsPerSecond == 0 {
		bad("clickhouse-max-inserts-per-second", "0 is not positive")
	}
	if _, err := sink.NewAllowList(c.ClickHouseAllowTables); err != nil {
		bad("clickhouse-allow-tables", "%v", err)
	}
	switch {
	case c.AuthToken == "simple":
	case c.AuthToken == "jwt" || strings.HasPrefix(c.AuthToken, "jwt,"):
		if _, err := c.jwtTokens(); err != nil {
			bad("auth-token", "%v", err)
		}
	default:
		bad("auth-token", "%q is not simple or jwt,...", c.AuthToken)
	}
	if c.GossipProfile != "lan" && c.GossipProfile != "fast" {
		bad("gossip-profile", "%q is not lan or fast", c.GossipProfile)
	}
	errs = append(errs, c.validateTLS()...)
	if err := c.checkPackages(c.promisedCredentials()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkHostPort accepts host:port with a non-empty host and a port from 0
// to 65535; IPv6 hosts are bracketed.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("host is empty")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// errVersion is returned by loadConfig when --version was given.
var errVersion = errors.New("version requested")

// option is one of chute's own settings. Its flag is --name; its YAML key
// is name in snake_case; its environment variable is CHUTE_ + NAME in
// UPPER_SNAKE_CASE. Every source sets it through value.Set.
type option struct {
	name  string     // flag name, e.g. "listen-client-urls"
	arg   string     // placeholder for --help, e.g. "urls"
	value flag.Value // bound to a field of a Config
	usage string     // one line for --help
	def   string     // default for --help when the value's initial text would mislead
}

// yamlKey is the option's key in the config file.
func (o option) yamlKey() string { return strings.ReplaceAll(o.name, "-", "_") }

// envVar is the option's environment variable.
func (o option) envVar() string {
	return "CHUTE_" + strings.ToUpper(strings.ReplaceAll(o.name, "-", "_"))
}

// options returns chute's own settings bound to the fields of c, in the
// order --help lists them.
func options(c *Config) []option {
	return []option{
		{"name", "name", (*stringValue)(&c.Name), "node name, unique in the cluster; the member id is a hash of it", "the host name"},
		{"cluster", "name", (*stringValue)(&c.Cluster), "cluster name; gossip from another cluster is refused", ""},
		{"listen-client-urls", "urls", (*listValue)(&c.ListenClientURLs), "etcd API listeners, comma list, all bound", ""},
		{"listen-client-http-urls", "urls", (*listValue)(&c.ListenClientHTTPURLs), "URLs that serve etcd's JSON gateway alone, comma list; then --listen-client-urls serve gRPC alone", ""},
		{"advertise-client-urls", "urls", (*listValue)(&c.AdvertiseClientURLs), "client URLs reported by MemberList, comma list", "the listen client URLs"},
		{"listen-peer-urls", "urls", (*listValue)(&c.ListenPeerURLs), "node-to-node gRPC listeners, comma list, never the client port", ""},
		{"advertise-peer-urls", "urls", (*listValue)(&c.AdvertisePeerURLs), "peer URLs sent to other nodes in gossip tags, comma list", "the listen peer URLs"},
		{"gossip-listen", "host:port", (*stringValue)(&c.GossipListen), "serf bind address, TCP and UDP", ""},
		{"gossip-advertise", "host:port", (*stringValue)(&c.GossipAdvertise), "gossip address other nodes use to reach this one", "the gossip listen address"},
		{"join", "host:port,...", (*listValue)(&c.Join), "gossip seeds, comma list, DNS names allowed; retried until one answers", ""},
		{"gossip-key", "base64", (*stringValue)(&c.GossipKey), "AES key of 16, 24 or 32 bytes that encrypts gossip", ""},
		{"clickhouse-url", "urls", (*stringValue)(&c.ClickHouseURL), "ClickHouse HTTP interfaces, http[s]://[user:pass@]host[:port], comma list: round-robin over the servers that are up, failover on transient errors; re-read on SIGHUP", ""},
		{"clickhouse-settings", "k=v,...", (*stringValue)(&c.ClickHouseSettings), "ClickHouse settings sent with every INSERT (a mapping in the file); a queue's \"settings\" override them by name; re-read on SIGHUP", ""},
		{"clickhouse-compression", "auto|none|gzip|deflate|zstd|lz4", (*stringValue)(&c.ClickHouseCompression), "compression of INSERT bodies (Content-Encoding, or ClickHouse's own blocks for lz4); auto is none to a server on a loopback address, gzip to any other; zstd needs a ClickHouse that decodes it (not 18.16); re-read on SIGHUP", ""},
		{"clickhouse-db", "name", (*stringValue)(&c.ClickHouseDB), "database for ch: queue names without a db. part", ""},
		{"clickhouse-ca-file", "path", (*stringValue)(&c.ClickHouseCAFile), "PEM CA bundle that verifies an https ClickHouse; re-read on SIGHUP", "the system's roots"},
		{"clickhouse-cert-file", "path", (*stringValue)(&c.ClickHouseCertFile), "PEM client certificate for an https ClickHouse, with --clickhouse-key-file; re-read on SIGHUP", ""},
		{"clickhouse-key-file", "path", (*stringValue)(&c.ClickHouseKeyFile), "PEM key of --clickhouse-cert-file; re-read on SIGHUP", ""},
		{"clickhouse-server-name", "name", (*stringValue)(&c.ClickHouseServerName), "name ClickHouse's certificate must hold", "the URL's host"},
		{"clickhouse-allow-tables", "patterns", (*listValue)(&c.ClickHouseAllowTables), "tables puts to ClickHouse queues may reach, comma list of db.table globs; system databases only when named; re-read on SIGHUP", "*.* except system databases"},
		{"clickhouse-batch-interval", "duration", (*durationValue)(&c.ClickHouseBatchInterval), "least time between two inserts into one table, of queues whose settings do not say batch_interval", ""},
		{"clickhouse-max-inserts-per-second", "rate", (*floatValue)(&c.ClickHouseMaxInsertsPerSecond), "most insert starts a second of one busy ClickHouse queue whose settings do not say max_inserts_per_second; fractions allowed", ""},
		{"clickhouse-max-inflight-inserts", "n", (*intValue)(&c.ClickHouseMaxInflightInserts), "most batches of one ClickHouse queue in ClickHouse at once, 1 to 16, where its settings do not say max_inflight_inserts", ""},
		{"clickhouse-timeout", "duration", (*durationValue)(&c.ClickHouseTimeout), "most time one insert request waits for ClickHouse's answer; a queue whose request timed out (it may have landed) waits twice as long for the next, up to 8 times this", ""},
		{"metrics-listen", "host:port", (*stringValue)(&c.MetricsListen), "HTTP address of /metrics, /healthz, /readyz and /status; empty disables it", ""},
		{"listen-metrics-urls", "urls", (*listValue)(&c.ListenMetricsURLs), "etcd's metrics listeners, comma list: /metrics and /health (/livez, /readyz) alone, as etcd serves them there; https:// ones use the client certificate", ""},
		{"metrics-max-tables", "n", (*intValue)(&c.MetricsMaxTables), "most table label values of the ClickHouse metrics, and queue label values of chute_queue_puts_total; later ones share \"_other\"", ""},
		{"config", "path", (*stringValue)(&c.ConfigFile), "YAML file with these settings, keys in snake_case", ""},
		{"log-level", "level", (*levelValue)(&c.LogLevel), "debug, info, warn or error", ""},
		{"enable-grpc-gateway", "", (*boolValue)(&c.EnableGRPCGateway), "serve etcd's JSON gateway (POST /v3/kv/put, /v3/kv/range, /v3/watch, ...) beside gRPC on the client URLs; =false for gRPC alone", ""},
		{"max-request-bytes", "n", (*intValue)(&c.MaxRequestBytes), "largest client request accepted, in bytes", ""},
		{"max-txn-ops", "n", (*intValue)(&c.MaxTxnOps), "most operations in one transaction", ""},
		{"max-key-bytes", "n", (*intValue)(&c.MaxKeyBytes), "longest key accepted, in bytes", ""},
		{"max-concurrent-streams", "n", (*int64Value)(&c.MaxConcurrentStreams), "most calls one client connection may have open at once", ""},
		{"grpc-keepalive-min-time", "duration", (*durationValue)(&c.GRPCKeepaliveMinTime), "least time between a client's keepalive pings; one pinging more often is sent away", ""},
		{"grpc-keepalive-interval", "duration", (*durationValue)(&c.GRPCKeepaliveInterval), "silence after which the server pings a client connection", ""},
		{"grpc-keepalive-timeout", "duration", (*durationValue)(&c.GRPCKeepaliveTimeout), "wait for a ping's answer before the connection is closed", ""},
		{"history-revisions", "n", (*int64Value)(&c.HistoryRevisions), "revisions of history kept before automatic compaction; 0 never compacts", ""},
		{"auth-token", "simple", (*stringValue)(&c.AuthToken), "token type: simple (signed tokens every member accepts) or jwt,pub-key=<file>,priv-key=<file>,sign-method=<alg>[,ttl=<duration>]", ""},
		{"bcrypt-cost", "n", (*intValue)(&c.BcryptCost), "bcrypt cost of password hashes, 4 to 31", ""},
		{"auth-token-ttl", "seconds", (*intValue)(&c.AuthTokenTTL), "how long a token from Authenticate is valid, in seconds", ""},
		{"gossip-profile", "lan|fast", (*stringValue)(&c.GossipProfile), "serf and raft timings: lan, or fast for tests on one machine", ""},
		{"data-dir", "path", (*stringValue)(&c.DataDir), "directory of everything the node stores: the key space's raft log and snapshots, and the queue log", "<name>.chute"},
		{"bootstrap-expect", "n", (*intValue)(&c.BootstrapExpect), "members without raft state that bootstrap a new cluster together", ""},
		{"raft-voters", "n", (*intValue)(&c.RaftVoters), "voting members, odd; the others are non-voters", ""},
		{"raft-dead-server-grace", "duration", (*durationValue)(&c.DeadServerGrace), "how long a failed member keeps its raft seat before the leader replaces it", ""},
		{"unsafe-no-fsync", "", (*boolValue)(&c.UnsafeNoFsync), "write the queue log without fsync: a machine crash may lose acknowledged puts (unsafe)", ""},
		{"quota-backend-bytes", "n", (*int64Value)(&c.QuotaBackendBytes), "largest size of the queue log under --data-dir, in bytes; a put past it fails with database space exceeded; 0 is no quota", ""},
		{"force-new-cluster", "", (*boolValue)(&c.ForceNewCluster), "recover a cluster that lost its majority: restart this node's raft as a cluster of one", ""},

		{"cert-file", "path", (*stringValue)(&c.ClientTLS.CertFile), "certificate of the https:// client URLs", ""},
		{"key-file", "path", (*stringValue)(&c.ClientTLS.KeyFile), "key of --cert-file", ""},
		{"client-cert-auth", "", (*boolValue)(&c.ClientTLS.ClientCertAuth), "require client certificates that --trusted-ca-file verifies", ""},
		{"trusted-ca-file", "path", (*stringValue)(&c.ClientTLS.TrustedCAFile), "CA bundle that verifies client certificates", ""},
		{"client-crl-file", "path", (*stringValue)(&c.ClientTLS.CRLFile), "revocation list of client certificates", ""},
		{"client-cert-allowed-hostname", "name", (*stringValue)(&c.ClientTLS.AllowedHostname), "host name client certificates must be valid for", ""},
		{"auto-tls", "", (*boolValue)(&c.AutoTLS), "serve the https:// client URLs with a self-signed certificate made at start", ""},
		{"peer-cert-file", "path", (*stringValue)(&c.PeerTLS.CertFile), "certificate of the peer link (https:// peer URLs)", ""},
		{"peer-key-file", "path", (*stringValue)(&c.PeerTLS.KeyFile), "key of --peer-cert-file", ""},
		{"peer-client-cert-auth", "", (*boolValue)(&c.PeerTLS.ClientCertAuth), "require peer client certificates that --peer-trusted-ca-file verifies", ""},
		{"peer-trusted-ca-file", "path", (*stringValue)(&c.PeerTLS.TrustedCAFile), "CA bundle that verifies peers", ""},
		{"peer-crl-file", "path", (*stringValue)(&c.PeerTLS.CRLFile), "revocation list of peer certificates", ""},
		{"peer-cert-allowed-cn", "name", (*stringValue)(&c.PeerTLS.AllowedCN), "the only common name accepted in peer client certificates", ""},
		{"peer-cert-allowed-hostname", "name", (*stringValue)(&c.PeerTLS.AllowedHostname), "host name peer client certificates must be valid for", ""},
		{"peer-client-cert-file", "path", (*stringValue)(&c.PeerTLS.ClientCertFile), "certificate presented when dialing peers", "--peer-cert-file"},
		{"peer-client-key-file", "path", (*stringValue)(&c.PeerTLS.ClientKeyFile), "key of --peer-client-cert-file", "--peer-key-file"},
		{"peer-auto-tls", "", (*boolValue)(&c.PeerAutoTLS), "peer link TLS made at start: derived from --gossip-key, else self-signed", ""},
		{"self-signed-cert-validity", "years", (*intValue)(&c.SelfSignedCertValidity), "validity of the certificates of --auto-tls and --peer-auto-tls", ""},
		{"tls-min-version", "TLS1.2|TLS1.3", (*stringValue)(&c.TLSMinVersion), "lowest TLS version of every listener and dialer", "TLS1.2"},
		{"tls-max-version", "TLS1.2|TLS1.3", (*stringValue)(&c.TLSMaxVersion), "highest TLS version", "TLS1.3"},
		{"cipher-suites", "names", (*listValue)(&c.CipherSuites), "TLS 1.2 cipher suites, comma list of IANA names", "Go's defaults"},
		{"metrics-cert-file", "path", (*stringValue)(&c.MetricsCertFile), "certificate that makes --metrics-listen serve HTTPS", ""},
		{"metrics-key-file", "path", (*stringValue)(&c.MetricsKeyFile), "key of --metrics-cert-file", ""},
	}
}

// newFlagSet returns a private flag set with chute's options bound to c,
// --version bound to showVersion and etcd's flags recorded in ignored. It
// prints nothing: its caller reports errors and help.
func newFlagSet(c *Config, showVersion *bool, ignored *ignoredFlags) (*flag.FlagSet, []option) {
	fs := flag.NewFlagSet("chute", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	opts := options(c)
	for _, o := range opts {
		fs.Var(o.value, o.name, o.usage)
	}
	fs.BoolVar(showVersion, "version", false, "print the version and exit")
	for _, e := range etcdFlags() {
		fs.Var(&ignoredValue{name: e.name, isBool: e.isBool, seen: ignored}, e.name, "accepted for etcd compatibility, ignored")
	}
	for _, r := range refusedEtcdFlags() {
		fs.Var(&refusedValue{r}, r.name, "refused: "+r.why)
	}
	return fs, opts
}

// loadConfig builds the node's Config from args (without the program name),
// the environment read through getenv and the YAML file named by --config
// or CHUTE_CONFIG. Precedence: flags > environment > file > defaults; every
// source goes through the flag's Set. An empty environment variable counts
// as unset. It returns the etcd flags that were given and ignored, each
// once, sorted. It returns flag.ErrHelp for -h/--help and errVersion for
// --version; any other error is a usage or configuration error.
func loadConfig(args []string, getenv func(string) string) (Config, []string, error) {
	cfg := DefaultConfig()
	var showVersion bool
	var ignored ignoredFlags
	fs, opts := newFlagSet(&cfg, &showVersion, &ignored)

	args, err := prescanArgs(fs, args, &ignored)
	if err != nil {
		return Config{}, nil, err
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, nil, err
	}
	if fs.NArg() > 0 {
		return Config{}, nil, fmt.Errorf("unexpected argument %q (subcommands: status)", fs.Arg(0))
	}
	if showVersion {
		return Config{}, nil, errVersion
	}
	if err := etcdEnvironment(fs, getenv, &ignored); err != nil {
		return Config{}, nil, err
	}
	onCmdLine := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { onCmdLine[f.Name] = true })

	if !onCmdLine["config"] {
		if p := getenv(option{name: "config"}.envVar()); p != "" {
			if err := fs.Set("config", p); err != nil {
				return Config{}, nil, fmt.Errorf("environment CHUTE_CONFIG: %w", err)
			}
		}
	}
	if cfg.ConfigFile != "" {
		if err := applyFile(fs, opts, cfg.ConfigFile, onCmdLine); err != nil {
			return Config{}, nil, err
		}
	}
	for _, o := range opts {
		if o.name == "config" || onCmdLine[o.name] {
			continue
		}
		if v := getenv(o.envVar()); v != "" {
			if err := fs.Set(o.name, v); err != nil {
				return Config{}, nil, fmt.Errorf("environment %s: %w", o.envVar(), err)
			}
		}
	}
	// Validate before filling in the advertise values, so that a bad
	// listen value is reported once.
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, err
	}
	if cfg.Telemetry, err = chuteotel.FromEnv(getenv, cfg.Telemetry); err != nil {
		return Config{}, nil, err
	}
	cfg.fillAdvertise()
	return cfg, ignored.sorted(), nil
}

// applyFile sets, from the YAML file at path, every option not given on the
// command line. Unknown keys are errors.
func applyFile(fs *flag.FlagSet, opts []option, path string, onCmdLine map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	entries, err := parseConfigFile(data)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	byKey := make(map[string]option, len(opts))
	for _, o := range opts {
		byKey[o.yamlKey()] = o
	}
	for _, e := range entries {
		o, ok := byKey[e.key]
		if !ok || o.name == "config" {
			return fmt.Errorf("config file %s: line %d: %s", path, e.line, unknownKey(e.key, byKey))
		}
		if e.mapping && o.name != "clickhouse-settings" {
			return fmt.Errorf("config file %s: line %d: %s: want a scalar or a list", path, e.line, e.key)
		}
		if _, isList := o.value.(*listValue); e.list && !isList && o.name != "clickhouse-url" {
			// Joined by commas, a list made one value of its items:
			// data_dir: [a, b] was the directory "a,b".
			return fmt.Errorf("config file %s: line %d: %s: want a scalar, not a list", path, e.line, e.key)
		}
		if onCmdLine[o.name] || e.null {
			continue
		}
		if err := fs.Set(o.name, e.value); err != nil {
			return fmt.Errorf("config file %s: line %d: %s: %w", path, e.line, e.key, err)
		}
	}
	return nil
}

// unknownKey describes a key the config file must not hold.
func unknownKey(key string, known map[string]option) string {
	if key == "config" {
		return `key "config" is not allowed in the config file`
	}
	if snake := strings.ReplaceAll(key, "-", "_"); snake != key {
		if _, ok := known[snake]; ok {
			return fmt.Sprintf("unknown key %q (keys are snake_case: did you mean %q?)", key, snake)
		}
	}
	return fmt.Sprintf("unknown key %q", key)
}

// fileEntry is one top-level key of the config file, its value as flag
// text (lists joined by commas) and its line.
type fileEntry struct {
	key     string
	value   string
	null    bool // the value is YAML null: the key is treated as absent
	mapping bool // the value was a mapping, written as a JSON object
	list    bool // the value was a list, its items joined by commas
	line    int
}

// parseConfigFile reads a YAML mapping of keys to scalars or lists of
// scalars. An empty document holds no keys.
func parseConfigFile(data []byte) ([]fileEntry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// One document: the keys of a second (after ---) were dropped
	// without a word, client_cert_auth among them.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("line %d: a second YAML document; the file holds one", next.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of keys to values", root.Line)
	}
	var entries []fileEntry
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: keys must be strings", k.Line)
		}
		if seen[k.Value] {
			return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		e := fileEntry{key: k.Value, line: k.Line}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch v.Kind {
		case yaml.ScalarNode:
			e.value, e.null = v.Value, v.Tag == "!!null"
		case yaml.SequenceNode:
			e.list = true
			items := make([]string, 0, len(v.Content))
			for _, it := range v.Content {
				if it.Kind == yaml.AliasNode {
					it = it.Alias
				}
				if it.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("line %d: %s: list items must be scalars", it.Line, k.Value)
				}
				items = append(items, it.Value)
			}
			e.value = strings.Join(items, ",")
		case yaml.MappingNode:
			// As JSON text (sink.ParseSettingsText), which keeps a value's
			// commas and '=': joined as name=value,... a value "a, b=c"
			// became two settings.
			m := make(map[string]string, len(v.Content)/2)
			for j := 0; j+1 < len(v.Content); j += 2 {
				mk, mv := v.Content[j], v.Content[j+1]
				if mv.Kind == yaml.AliasNode {
					mv = mv.Alias
				}
				if mk.Kind != yaml.ScalarNode || mv.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("line %d: %s: mapping keys and values must be scalars", mk.Line, k.Value)
				}
				if _, dup := m[mk.Value]; dup {
					return nil, fmt.Errorf("line %d: %s: key %q appears twice", mk.Line, k.Value, mk.Value)
				}
				value := mv.Value
				if b, err := strconv.ParseBool(value); err == nil && mv.Tag == "!!bool" {
					value = map[bool]string{true: "1", false: "0"}[b] // as a queue's JSON true and false
				}
				m[mk.Value] = value
			}
			text, err := json.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
			}
			e.value, e.mapping = string(text), true
		default:
			return nil, fmt.Errorf("line %d: %s: want a scalar or a list", v.Line, k.Value)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// stringValue is a flag.Value for a string field.
type stringValue string

func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

// listValue is a flag.Value for a comma list: "a, b,,c" is [a b c]. Each
// Set replaces the list, as etcd's URL flags do.
type listValue []string

func (v *listValue) String() string { return strings.Join(*v, ",") }

func (v *listValue) Set(s string) error {
	*v = splitList(s)
	return nil
}

// splitList splits a comma list, trimming spaces and dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// boolValue is a flag.Value for a bool field: --flag, --flag=true or
// --flag=false on the command line, true/false in the file.
type boolValue bool

func (v *boolValue) String() string { return strconv.FormatBool(bool(*v)) }

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a boolean", s)
	}
	*v = boolValue(b)
	return nil
}

// IsBoolFlag lets the flag go without a value on the command line.
func (v *boolValue) IsBoolFlag() bool { return true }

// intValue is a flag.Value for an int field, in decimal.
type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*v = intValue(n)
	return nil
}

// int64Value is a flag.Value for an int64 field, in decimal.
type int64Value int64

func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*v = int64Value(n)
	return nil
}

// floatValue is a flag.Value for a float64 field, a decimal number.
type floatValue float64

func (v *floatValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }

func (v *floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%q is not a number", s)
	}
	*v = floatValue(f)
	return nil
}

// durationValue is a flag.Value for a time.Duration field, as
// time.ParseDuration reads it ("90s", "1m30s").
type durationValue time.Duration

func (v *durationValue) String() string { return time.Duration(*v).String() }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 30s or 1m", s)
	}
	*v = durationValue(d)
	return nil
}

// levelValue is a flag.Value for a slog.Level named debug, info, warn or
// error, in any case.
type levelValue slog.Level

func (v *levelValue) String() string { return strings.ToLower(slog.Level(*v).String()) }

func (v *levelValue) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		*v = levelValue(slog.LevelDebug)
	case "info":
		*v = levelValue(slog.LevelInfo)
	case "warn":
		*v = levelValue(slog.LevelWarn)
	case "error", "panic", "fatal": // etcd's two last: its errors and worse
		*v = levelValue(slog.LevelError)
	default:
		return fmt.Errorf("%q is not one of debug, info, warn, error (panic and fatal, etcd's, are error)", s)
	}
	return nil
}

// flagOf names the flag of a package's config field, with a hint for
// when the field is at fault because of other flags.
type flagOf struct {
	name, hint string
}

// The flags of the fields of each package configuration built from
// Config, by field name.
func gossipFlags() map[string]flagOf {
	return map[string]flagOf{
		"Name": {name: "name"}, "Cluster": {name: "cluster"},
		"BindAddr": {name: "gossip-listen"}, "AdvertiseAddr": {name: "gossip-advertise"},
		"Join": {name: "join"}, "Key": {name: "gossip-key"},
		"PeerURLs": {name: "advertise-peer-urls"}, "ClientURLs": {name: "advertise-client-urls"},
	}
}

func peerFlags() map[string]flagOf {
	return map[string]flagOf{
		"ListenURLs":  {name: "listen-peer-urls"},
		"Credentials": {name: "listen-peer-urls", hint: "give --peer-cert-file and --peer-key-file, --peer-auto-tls or --gossip-key"},
	}
}

func kvFlags() map[string]flagOf {
	return map[string]flagOf{
		"ListenClientURLs":     {name: "listen-client-urls"},
		"TLS":                  {name: "listen-client-urls", hint: "give --cert-file and --key-file, or --auto-tls"},
		"ListenClientHTTPURLs": {name: "listen-client-http-urls"},
		"HTTPTLS":              {name: "listen-client-http-urls", hint: "give --cert-file and --key-file, or --auto-tls"},
		"NoGateway":            {name: "enable-grpc-gateway"},
		"AdvertiseClientURLs":  {name: "advertise-client-urls"},
		"AdvertisePeerURLs":    {name: "advertise-peer-urls"},
		"MaxRequestBytes":      {name: "max-request-bytes"},
		"MaxTxnOps":            {name: "max-txn-ops"},
		"MaxKeyBytes":          {name: "max-key-bytes"},
		"HistoryRevisions":     {name: "history-revisions"},
		"KeepaliveMinTime":     {name: "grpc-keepalive-min-time"},
		"KeepaliveInterval":    {name: "grpc-keepalive-interval"},
		"KeepaliveTimeout":     {name: "grpc-keepalive-timeout"},
		"BcryptCost":           {name: "bcrypt-cost"},
		"AuthTokenTTL":         {name: "auth-token-ttl"},
	}
}

func dispatchFlags() map[string]flagOf {
	return map[string]flagOf{
		"MemberID":         {name: "name"},
		"MaxKeyBytes":      {name: "max-key-bytes"},
		"MaxRequestBytes":  {name: "max-request-bytes"},
		"QuotaBytes":       {name: "quota-backend-bytes"},
		"MetricsMaxTables": {name: "metrics-max-tables"},

		"BatchInterval":       {name: "clickhouse-batch-interval"},
		"MaxInsertsPerSecond": {name: "clickhouse-max-inserts-per-second"},
		"MaxInflightInserts":  {name: "clickhouse-max-inflight-inserts"},
	}
}

func sinkFlags() map[string]flagOf {
	return map[string]flagOf{
		"URL": {name: "clickhouse-url"}, "Database": {name: "clickhouse-db"},
		"Settings": {name: "clickhouse-settings"}, "Compression": {name: "clickhouse-compression"},
		"CAFile": {name: "clickhouse-ca-file"}, "CertFile": {name: "clickhouse-cert-file"},
		"KeyFile": {name: "clickhouse-key-file"}, "ServerName": {name: "clickhouse-server-name"},
	}
}

// nameFlags returns the errors of err, a package's Validate error, each
// field error renamed after its flag in flags. Errors of fields no flag
// sets keep the package's words.
func raftFlags() map[string]flagOf {
	return map[string]flagOf{
		"Dir":             {name: "data-dir"},
		"MemberID":        {name: "name"},
		"BootstrapExpect": {name: "bootstrap-expect"},
		"Voters":          {name: "raft-voters"},
		"DeadServerGrace": {name: "raft-dead-server-grace"},
	}
}

// dropFields returns err without the *setting.FieldErrors of the fields
// named.
func dropFields(err error, fields ...string) error {
	if fe, ok := err.(*setting.FieldError); ok {
		if slices.Contains(fields, fe.Field) {
			return nil
		}
		return err
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			if e = dropFields(e, fields...); e != nil {
				out = append(out, e)
			}
		}
		return errors.Join(out...)
	}
	return err
}

func nameFlags(err error, flags map[string]flagOf) []error {
	if err == nil {
		return nil
	}
	if fe, ok := err.(*setting.FieldError); ok {
		f, known := flags[fe.Field]
		if !known {
			return []error{err}
		}
		if need, ok := flags[fe.Needs]; ok && fe.Needs != "" {
			return []error{fmt.Errorf("--%s: %w (--%s)", f.name, fe.Err, need.name)}
		}
		if f.hint != "" {
			return []error{fmt.Errorf("--%s: %w: %s", f.name, fe.Err, f.hint)}
		}
		return []error{fmt.Errorf("--%s: %w", f.name, fe.Err)}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, nameFlags(e, flags)...)
		}
		return out
	}
	return []error{err}
}

// checkPackages builds the configuration of every package from c, as
// newNode does, with the credentials of the client and peer listeners
// (nil: plain), and returns every package's Validate error, named after
// the flags, each message once.
func (c Config) checkPackages(client, peer credentials.TransportCredentials) error {
	var all []error
	g, err := c.gossipConfig()
	if err != nil {
		all = append(all, err)
	}
	all = append(all, nameFlags(g.Validate(), gossipFlags())...)
	all = append(all, nameFlags(c.peerConfig(peer).Validate(), peerFlags())...)
	// newKeySpace adds the transport, state machine and members.
	all = append(all, nameFlags(dropFields(c.raftNodeConfig().Validate(), "Transport", "FSM", "Members"), raftFlags())...)
	all = append(all, nameFlags(c.kvConfig(client).Validate(), kvFlags())...)
	all = append(all, nameFlags(c.dispatchConfig().Validate(), dispatchFlags())...)
	all = append(all, nameFlags(c.sinkConfig().Validate(), sinkFlags())...)
	var errs []error
	seen := make(map[string]bool)
	for _, e := range all {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

// promisedCredentials stands for the credentials newTLSSources builds
// from the TLS flags, without reading or generating a certificate: a
// non-nil value where the flags promise TLS on the client or the peer
// listener. Validate checks the packages' rules with them.
func (c Config) promisedCredentials() (client, peer credentials.TransportCredentials) {
	if c.ClientTLS.CertFile != "" || c.ClientTLS.KeyFile != "" || c.AutoTLS {
		client = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	if c.PeerTLS.CertFile != "" || c.PeerTLS.KeyFile != "" || c.PeerAutoTLS || c.GossipKey != "" {
		peer = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	return client, peer
}

// advertised returns the advertise URLs, or the listen URLs when there
// are none (before fillAdvertise).
func advertised(advertise, listen []string) []string {
	if len(advertise) == 0 {
		return listen
	}
	return advertise
}

// gossipConfig is c's membership configuration, less what newNode adds
// at run time (boot, logger). Its error is that of --gossip-key.
func (c Config) gossipConfig() (gossip.Config, error) {
	g := gossip.DefaultConfig()
	g.Name = c.Name
	g.Cluster = c.Cluster
	g.BindAddr = c.GossipListen
	g.AdvertiseAddr = c.GossipAdvertise
	g.Join = c.Join
	g.PeerURLs = advertised(c.AdvertisePeerURLs, c.ListenPeerURLs)
	g.ClientURLs = advertised(c.AdvertiseClientURLs, c.ListenClientURLs)
	g.Version = version
	g.Fast = c.GossipProfile == "fast"
	g.ReserveTags = raftnode.LargestTags(c.BootstrapExpect)
	if c.GossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(c.GossipKey)
		if err != nil {
			return g, errors.New("--gossip-key: not valid base64")
		}
		g.Key = key
	}
	return g, nil
}

// peerConfig is c's peer link listener configuration, served with creds
// (nil: plain text), less what newNode adds at run time.
func (c Config) peerConfig(creds credentials.TransportCredentials) peer.Config {
	return peer.Config{
		ListenURLs:  c.ListenPeerURLs,
		ClusterID:   gossip.ClusterID(c.Cluster),
		Credentials: creds,
	}
}

// dataDir is DataDir, or its default: Name + ".chute".
func (c Config) dataDir() string {
	if c.DataDir != "" {
		return c.DataDir
	}
	return c.Name + ".chute"
}

// raftNodeConfig is c's raft node configuration, less what newKeySpace
// adds at run time (transport, state machine, members).
func (c Config) raftNodeConfig() raftnode.Config {
	n := raftnode.DefaultConfig()
	n.Dir = c.dataDir()
	n.MemberID = gossip.MemberID(c.Name)
	n.LocalAddr = "127.0.0.1:0" // raftAddr's errors are newKeySpace's
	if addr, err := raftAddr(c); err == nil {
		n.LocalAddr = raft.ServerAddress(addr)
	}
	n.BootstrapExpect = c.BootstrapExpect
	n.Voters = c.RaftVoters
	n.DeadServerGrace = c.DeadServerGrace
	n.ForceNewCluster = c.ForceNewCluster
	return n
}

// kvConfig is c's etcd API configuration, served with creds on its
// https:// URLs (nil: none), less what newNode adds at run time.
func (c Config) kvConfig(creds credentials.TransportCredentials) kv.Config {
	k := kv.DefaultConfig()
	k.Name = c.Name
	k.ClusterID = gossip.ClusterID(c.Cluster)
	k.MemberID = gossip.MemberID(c.Name)
	k.ListenClientURLs = c.ListenClientURLs
	k.AdvertiseClientURLs = c.AdvertiseClientURLs
	k.AdvertisePeerURLs = c.AdvertisePeerURLs
	k.MaxRequestBytes = c.MaxRequestBytes
	k.NoGateway = !c.EnableGRPCGateway
	k.ListenClientHTTPURLs = c.ListenClientHTTPURLs
	k.MaxTxnOps = c.MaxTxnOps
	k.MaxKeyBytes = c.MaxKeyBytes
	if c.MaxConcurrentStreams >= 1 && c.MaxConcurrentStreams <= math.MaxUint32 { // Validate says otherwise
		k.MaxConcurrentStreams = uint32(c.MaxConcurrentStreams)
	}
	k.KeepaliveMinTime = c.GRPCKeepaliveMinTime
	k.KeepaliveInterval = c.GRPCKeepaliveInterval
	k.KeepaliveTimeout = c.GRPCKeepaliveTimeout
	k.HistoryRevisions = c.HistoryRevisions
	k.BcryptCost = c.BcryptCost
	k.AuthTokenTTL = time.Duration(c.AuthTokenTTL) * time.Second
	// Streams that require a leader end after three election timeouts
	// without one, as in etcd.
	k.LeaderCheckInterval = raftTimings(c.GossipProfile).ElectionTimeout
	k.Version = version
	k.TLS = creds
	k.ClientCertAuth = c.ClientTLS.ClientCertAuth
	return k
}

// dispatchConfig is c's queue configuration, less what newNode adds at
// run time. Messages from other members are held to the client limits.
func (c Config) dispatchConfig() dispatch.Config {
	return dispatch.Config{
		MemberID:         gossip.MemberID(c.Name),
		ClusterID:        gossip.ClusterID(c.Cluster),
		MaxKeyBytes:      c.MaxKeyBytes,
		MaxRequestBytes:  c.MaxRequestBytes,
		DataDir:          c.dataDir(),
		NoSync:           c.UnsafeNoFsync,
		QuotaBytes:       c.QuotaBackendBytes,
		MetricsMaxTables: c.MetricsMaxTables,

		BatchInterval:       c.ClickHouseBatchInterval,
		MaxInsertsPerSecond: c.ClickHouseMaxInsertsPerSecond,
		MaxInflightInserts:  c.ClickHouseMaxInflightInserts,
		InsertTimeout:       c.ClickHouseTimeout,
		FullWait:            dispatch.DefaultFullWait,
	}
}

// sinkConfig is c's ClickHouse configuration. The TLS suite's errors
// are the flags' own (tlsSuite), reported by Validate.
func (c Config) sinkConfig() sink.Config {
	suite, _ := c.tlsSuite()
	return sink.Config{
		Suite:       suite,
		URL:         c.ClickHouseURL,
		Settings:    c.ClickHouseSettings,
		Compression: c.ClickHouseCompression,
		Database:    c.ClickHouseDB,
		CAFile:      c.ClickHouseCAFile,
		CertFile:    c.ClickHouseCertFile,
		KeyFile:     c.ClickHouseKeyFile,
		ServerName:  c.ClickHouseServerName,
	}
}
