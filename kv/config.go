package kv

import (
	"crypto/tls"
	"log/slog"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"chute/kv/auth"
)

// APIVersion is the etcd version chute reports in Status: the etcd API level
// it answers as. Clients compare it with their own (clientv3 with
// RejectOldCluster refuses servers older than its previous minor release).
// chute's own version is Config.Version.
const APIVersion = "3.6.0"

// Default limits, as etcd's.
const (
	DefaultMaxRequestBytes  = 1536 * 1024 // etcd's --max-request-bytes
	DefaultMaxTxnOps        = 128         // etcd's --max-txn-ops
	DefaultMaxKeyBytes      = 1024
	DefaultHistoryRevisions = 100_000
	DefaultMinLeaseTTL      = 2                 // seconds; etcd's minimum with its default timings
	DefaultBcryptCost       = 10                // etcd's --bcrypt-cost
	DefaultAuthTokenTTL     = 300 * time.Second // etcd's --auth-token-ttl
)

// grpcOverheadBytes is what etcd allows on top of MaxRequestBytes for gRPC
// framing, so that an over-limit request reaches the handler and gets etcd's
// "request is too large" instead of a transport error.
const grpcOverheadBytes = 512 * 1024

// Config configures a Server. Build it with DefaultConfig and change what
// you need; New never reads flags, files or the environment.
type Config struct {
	// Name is this member's name in MemberList. Empty: "default".
	Name string
	// ClusterID and MemberID fill every response header. Zero: zero, which
	// etcd clients accept but tools print as 0.
	ClusterID uint64
	MemberID  uint64

	// ListenClientURLs are bound, every one, to serve the etcd API
	// (http://host:port or https://host:port; port 0 picks a free port).
	// Empty: nothing is served, which only tests of the store itself want.
	ListenClientURLs []string
	// TLS serves the https:// client URLs; http:// ones stay plain, as in
	// etcd. Nil: an https:// URL is invalid.
	TLS credentials.TransportCredentials
	// ClientCertAuth makes the CommonName of a client certificate TLS
	// verified the caller of a call without a token, with auth enabled
	// (etcd's --client-cert-auth). False: a certificate names nobody,
	// as in etcd, even one verified against a trusted CA.
	ClientCertAuth bool
	// NoGateway serves gRPC alone on the client URLs (etcd's
	// --enable-grpc-gateway=false). False: etcd's JSON gateway answers
	// HTTP/1.1 requests under /v3/ there too, as etcd's does.
	NoGateway bool
	// ListenClientHTTPURLs are bound, every one, to serve the JSON
	// gateway alone (etcd's --listen-client-http-urls): then the
	// ListenClientURLs serve gRPC alone. https:// ones need TLS and
	// GatewayTLS. Empty: the gateway shares the ListenClientURLs.
	ListenClientHTTPURLs []string
	// GatewayTLS is the server config of TLS (the one TLS makes gRPC's
	// credentials of) for the handshakes the https:// URLs make
	// themselves to tell the gateway's clients from gRPC's, and of the
	// https:// ListenClientHTTPURLs. Nil: https:// ListenClientURLs serve
	// gRPC alone.
	GatewayTLS *tls.Config
	// AdvertiseClientURLs and AdvertisePeerURLs are what MemberList reports
	// for this member. Empty: the listen URLs, and no peer URLs.
	AdvertiseClientURLs []string
	AdvertisePeerURLs   []string

	// MaxRequestBytes limits a request's encoded size. Zero: DefaultMaxRequestBytes.
	MaxRequestBytes int
	// MaxTxnOps limits the compares and the ops of each branch of a txn.
	// Zero: DefaultMaxTxnOps.
	MaxTxnOps int
	// MaxKeyBytes limits the length of a key that is written. Zero:
	// DefaultMaxKeyBytes.
	MaxKeyBytes int
	// HistoryRevisions is how many revisions of history are kept at least:
	// when twice as many have accumulated the store compacts itself down to
	// this many, as etcd's --auto-compaction-mode=revision would. Zero: the
	// history is kept until a client compacts it.
	HistoryRevisions int64
	// MinLeaseTTL raises shorter granted TTLs, in seconds. Zero: 1.
	MinLeaseTTL int64

	// WatchSyncInterval is how often watchers that fell behind are fed from
	// history. Zero: 50ms.
	WatchSyncInterval time.Duration
	// WatchProgressInterval is how often idle watchers that asked for
	// progress notifications get one. Zero: 10 minutes, as etcd.
	WatchProgressInterval time.Duration
	// LeaseCheckInterval is how often expired leases are revoked. Zero: 100ms.
	LeaseCheckInterval time.Duration
	// LeaderCheckInterval is how often a member of a cluster checks that
	// it knows a leader, for the streams that require one: they end after
	// three checks in a row without (etcd checks every election timeout).
	// Zero: 1s.
	LeaderCheckInterval time.Duration

	// MaxConcurrentStreams bounds the streams (calls) one client
	// connection may have open at once (etcd's --max-concurrent-streams).
	// Zero: no bound but gRPC's own, 2^32-1, as etcd.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is how often a client may ping the server at most
	// (etcd's --grpc-keepalive-min-time); one that pings more often is
	// sent away. Zero: 1s, below the 2s etcdctl pings every (etcd's
	// default is 5s).
	KeepaliveMinTime time.Duration
	// KeepaliveInterval is how long a connection may stay silent before
	// the server pings it (etcd's --grpc-keepalive-interval), and
	// KeepaliveTimeout how long it then waits for the answer before it
	// closes the connection (--grpc-keepalive-timeout): a frozen client,
	// or one behind a link that stalls without closing, is found so, and
	// its watches and consumers end. Zero: 2h and 20s, etcd's defaults.
	KeepaliveInterval, KeepaliveTimeout time.Duration

	// BcryptCost is the cost of the bcrypt hashes of passwords (etcd's
	// --bcrypt-cost, 4 to 31). Zero: DefaultBcryptCost.
	BcryptCost int
	// AuthTokenTTL is how long a token from Authenticate is valid on
	// every member (etcd's --auth-token-ttl). Zero: DefaultAuthTokenTTL.
	AuthTokenTTL time.Duration
	// JWT, when set, makes Authenticate issue etcd's JWTs signed by its
	// key, and calls be checked against it, instead of simple tokens
	// (etcd's --auth-token jwt,...; its ttl replaces AuthTokenTTL). Nil:
	// simple tokens.
	JWT *auth.JWT

	// Queues serves the queue namespace (/q/, /queue/). Nil: every key is
	// plain KV.
	Queues Queues

	// Members lists the cluster for MemberList. Nil: this member alone.
	Members Members
	// Ready reports whether the node is ready for clients (cmd/chute's
	// /readyz): gRPC's health service answers SERVING while it and the
	// server both are. Nil: while the server serves.
	Ready func() bool
	// Version is chute's version, logged at start. Empty: "unknown".
	Version string
	// Logger receives the server's logs. Nil: discarded.
	Logger *slog.Logger
	// Meter records per-RPC counts and latencies. Nil: nothing is recorded.
	Meter metric.MeterProvider
	// Tracer traces the KV calls (Range, Put, DeleteRange, Txn, Compact),
	// as children of the W3C trace context in the client's gRPC metadata,
	// read with Propagator; the context reaches Queues.Produce. Nil: no
	// spans, and no tracing work on any call.
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// Members lists the members of the cluster. Implementations must be safe for
// concurrent use; the returned slice belongs to the caller.
type Members interface {
	Members() []*pb.Member
}

// DefaultConfig returns the configuration of a single node on etcd's default
// client port, with etcd's limits.
func DefaultConfig() Config {
	return Config{
		Name:                  "default",
		ListenClientURLs:      []string{"http://127.0.0.1:2379"},
		MaxRequestBytes:       DefaultMaxRequestBytes,
		MaxTxnOps:             DefaultMaxTxnOps,
		MaxKeyBytes:           DefaultMaxKeyBytes,
		HistoryRevisions:      DefaultHistoryRevisions,
		MinLeaseTTL:           DefaultMinLeaseTTL,
		WatchSyncInterval:     50 * time.Millisecond,
		WatchProgressInterval: 10 * time.Minute,
		LeaseCheckInterval:    100 * time.Millisecond,
		LeaderCheckInterval:   time.Second,
		BcryptCost:            DefaultBcryptCost,
		AuthTokenTTL:          DefaultAuthTokenTTL,
	}
}

// withDefaults returns c with every zero field given its documented meaning.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "default"
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.MinLeaseTTL == 0 {
		c.MinLeaseTTL = 1
	}
	if c.WatchSyncInterval == 0 {
		c.WatchSyncInterval = 50 * time.Millisecond
	}
	if c.WatchProgressInterval == 0 {
		c.WatchProgressInterval = 10 * time.Minute
	}
	if c.LeaseCheckInterval == 0 {
		c.LeaseCheckInterval = 100 * time.Millisecond
	}
	if c.LeaderCheckInterval == 0 {
		c.LeaderCheckInterval = time.Second
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = math.MaxUint32
	}
	if c.KeepaliveMinTime == 0 {
		c.KeepaliveMinTime = time.Second
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 2 * time.Hour
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = 20 * time.Second
	}
	if c.BcryptCost == 0 {
		c.BcryptCost = DefaultBcryptCost
	}
	if c.AuthTokenTTL == 0 {
		c.AuthTokenTTL = DefaultAuthTokenTTL
	}
	if c.Version == "" {
		c.Version = "unknown"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.AdvertiseClientURLs) == 0 {
		c.AdvertiseClientURLs = c.ListenClientURLs
	}
	return c
}
