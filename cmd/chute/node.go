package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"chute/dispatch"
	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/nodestatus"
	"chute/kv"
	"chute/kv/raftnode"
	chuteotel "chute/otel"
	"chute/sink"
)

// shutdownTimeout bounds the whole ordered shutdown.
const shutdownTimeout = 10 * time.Second

// handoffTimeout bounds handing the queues over, within shutdownTimeout.
const handoffTimeout = 6 * time.Second

// shutdownReserve is what a shutdown keeps, of shutdownTimeout, for serf's
// leave (about a second on LAN timings) and the stops after it, whatever
// the hand-overs before took.
const shutdownReserve = 3 * time.Second

// node is one running chute: membership, replication, the etcd API, the
// operator HTTP endpoints and telemetry.
type node struct {
	log       *slog.Logger
	providers *chuteotel.Providers
	members   *gossip.Membership
	peer      *peer.Server // the peer link's listener
	keySpace  *keySpace    // raft under the key space
	queues    *dispatch.Manager
	kv        *kv.Server
	// servers are the HTTP servers of --metrics-listen and of each
	// --listen-metrics-urls; httpErr carries the error each Serve returns,
	// and serving counts those not received yet.
	servers    []*http.Server
	httpErr    chan error
	serving    int
	logFailed  chan error     // the queue log failed for good (dispatch.Config.OnLogFailed)
	wg         sync.WaitGroup // the membership event loop
	stopEvents func()
	clickhouse *clickhouseSettings
	tls        tlsSources
	ready      *readiness
}

// clickhouseSettings are the ClickHouse URLs, database, TLS
// configuration, insert settings and compression, read by the queues at
// every batch, and the tables puts may reach, read at every put to a
// ClickHouse queue; a reload changes them.
type clickhouseSettings struct {
	mu          sync.Mutex // guards url, db, tls, settings, compression and patterns, and the writes of allowed
	url, db     string
	tls         *tls.Config // nil: the system's roots, no client certificate
	settings    sink.Settings
	compression sink.Compression
	patterns    []string // of --clickhouse-allow-tables, as last applied
	// allowed is the list and the database puts are checked against,
	// read without the lock on every put; replaced only when one of them
	// changed, as dispatch remembers its answers per list.
	allowed atomic.Pointer[allowedTables]
}

// allowedTables is what dispatch.Config.ClickHouseTables returns.
type allowedTables struct {
	allow *sink.AllowList
	db    string
}

// newClickHouseSettings returns cfg's ClickHouse settings, with tlsCfg
// read from its files. Its errors name the flag at fault.
func newClickHouseSettings(cfg Config, tlsCfg *tls.Config) (*clickhouseSettings, error) {
	set, comp, err := cfg.clickhouseOptions()
	if err != nil {
		return nil, err
	}
	allow, err := sink.NewAllowList(cfg.ClickHouseAllowTables)
	if err != nil {
		return nil, fmt.Errorf("--clickhouse-allow-tables: %w", err)
	}
	c := &clickhouseSettings{url: cfg.ClickHouseURL, db: cfg.ClickHouseDB, tls: tlsCfg, settings: set, compression: comp,
		patterns: cfg.ClickHouseAllowTables}
	c.allowed.Store(&allowedTables{allow: allow, db: cfg.ClickHouseDB})
	return c, nil
}

// clickhouseOptions parses cfg's ClickHouse insert settings and
// compression; its errors name the flag.
func (c Config) clickhouseOptions() (sink.Settings, sink.Compression, error) {
	set, err := sink.ParseSettingsText(c.ClickHouseSettings)
	if err != nil {
		return sink.Settings{}, 0, fmt.Errorf("--clickhouse-settings: %w", err)
	}
	comp, err := sink.ParseCompression(c.ClickHouseCompression)
	if err != nil {
		return sink.Settings{}, 0, fmt.Errorf("--clickhouse-compression: %w", err)
	}
	return set, comp, nil
}

func (c *clickhouseSettings) options() (sink.Settings, sink.Compression) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings, c.compression
}

// tables returns the tables puts may reach and the database of names
// without one.
func (c *clickhouseSettings) tables() (*sink.AllowList, string) {
	t := c.allowed.Load()
	if t == nil {
		return nil, c.db
	}
	return t.allow, t.db
}

func (c *clickhouseSettings) get() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url, c.db
}

func (c *clickhouseSettings) tlsConfig() *tls.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tls
}

// update applies a reloaded configuration: an empty URL keeps the old one
// with its TLS configuration; otherwise the TLS files are read again, so
// a renewed CA or client certificate applies from the next batch, with
// the insert settings and the compression. The allowed tables and the
// database apply from the next put. When the TLS files cannot be read,
// or the settings, compression or allowed tables parsed, nothing
// changes.
func (c *clickhouseSettings) update(next Config, logger *slog.Logger) {
	set, comp, err := next.clickhouseOptions()
	if err != nil {
		logger.Error("configuration not reloaded: ClickHouse settings cannot be used", "err", err)
		return
	}
	var tlsCfg *tls.Config
	if next.ClickHouseURL != "" {
		var err error
		if tlsCfg, err = next.clickhouseTLS(); err != nil {
			logger.Error("configuration not reloaded: ClickHouse TLS files cannot be used", "err", err)
			return
		}
	}
	allow, err := sink.NewAllowList(next.ClickHouseAllowTables)
	if err != nil {
		logger.Error("configuration not reloaded: --clickhouse-allow-tables", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	url, db := next.ClickHouseURL, next.ClickHouseDB
	tablesChanged := db != c.db || !slices.Equal(next.ClickHouseAllowTables, c.patterns)
	changed := (url != "" && url != c.url) || tablesChanged || tlsCfg != nil || (url != "" && c.tls != nil) ||
		set != c.settings || comp != c.compression
	if url != "" {
		c.url, c.tls = url, tlsCfg
	}
	c.db, c.settings, c.compression = db, set, comp
	if tablesChanged {
		c.patterns = next.ClickHouseAllowTables
		c.allowed.Store(&allowedTables{allow: allow, db: db})
	}
	if changed {
		logger.Info("configuration reloaded: ClickHouse settings apply from the next batch, allowed tables from the next put",
			"clickhouse_db", db, "clickhouse_tls_files", tlsCfg != nil, "clickhouse_settings", set.String(),
			"clickhouse_compression", comp.String(), "clickhouse_allow_tables", allow.String())
	} else {
		logger.Info("configuration reloaded: nothing that applies while running changed")
	}
}

// runNode starts a node from cfg and blocks until ctx is cancelled
// (SIGTERM/SIGINT) or a part fails (the metrics listener, or gossip, whose
// serf stopped on its own: see gossip.Membership.Stopped); then it shuts down in order: stop being
// ready, leave the gossip cluster (others see "left", not "failed"), stop the
// etcd API, stop replication and membership, the metrics listener, and flush
// telemetry.
//
// Configurations arriving on reload (SIGHUP; nil: none) change the
// ClickHouse URLs, database, TLS files, insert settings and compression
// from the next batch on; an empty URL in the new configuration keeps the
// old one. Other settings need a restart.
func runNode(ctx context.Context, cfg Config, logger *slog.Logger, reload <-chan Config) error {
	n, err := newNode(cfg, logger)
	if err != nil {
		return err
	}
	if err := n.start(); err != nil {
		n.shutdown()
		return err
	}
	logger.Info("chute started", "name", cfg.Name, "cluster", cfg.Cluster,
		"member_id", gossip.ID(gossip.MemberID(cfg.Name)), "version", version)

	var runErr error
	for runErr == nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case next := <-reload:
			n.clickhouse.update(next, logger)
			n.tls.reload(logger)
		case err := <-n.httpErr:
			runErr = fmt.Errorf("metrics listener: %w", err)
			n.serving--
		case err := <-n.logFailed:
			// As etcd exits when its WAL cannot be synced: a restart
			// recovers what reached the disk, and puts are taken again.
			runErr = fmt.Errorf("queue log failed: %w", err)
			logger.Error("queue log failed: shutting down so that a restart recovers it", "err", err)
		case <-n.members.Stopped():
			runErr = n.members.Err()
			logger.Error("gossip stopped, node is out of the cluster: shutting down", "err", runErr)
		}
	}
	logger.Info("shutting down")
	return errors.Join(runErr, n.shutdown())
}

// newNode builds a node from a validated cfg. It checks every package's
// configuration again, now with the real credentials, before it binds
// anything: the errors it returns before the first listener opens are
// configErrors.
func newNode(cfg Config, logger *slog.Logger) (_ *node, err error) {
	tlsSrc, err := newTLSSources(cfg, logger)
	if err != nil {
		return nil, configError{err}
	}
	var clientCreds, peerCreds credentials.TransportCredentials
	if tlsSrc.client != nil {
		clientCreds = tlsSrc.client.Credentials()
	}
	if tlsSrc.peer != nil {
		peerCreds = tlsSrc.peer.Credentials()
	}
	if err := cfg.checkPackages(clientCreds, peerCreds); err != nil {
		return nil, configError{err}
	}
	gcfg, err := cfg.gossipConfig()
	if err != nil {
		return nil, configError{err}
	}
	chTLS, err := cfg.clickhouseTLS()
	if err != nil {
		return nil, configError{err}
	}
	chSettings, err := newClickHouseSettings(cfg, chTLS)
	if err != nil {
		return nil, configError{err}
	}
	ocfg := cfg.Telemetry
	ocfg.InstanceID, ocfg.Version = cfg.Name, version
	if err := ocfg.Validate(); err != nil {
		return nil, configError{err}
	}
	providers, err := chuteotel.New(ocfg)
	if err != nil {
		return nil, err
	}
	n := &node{log: logger, providers: providers, httpErr: make(chan error, 1+len(cfg.ListenMetricsURLs)), logFailed: make(chan error, 1), tls: tlsSrc}
	defer func() {
		if err != nil { // release what was built, in the reverse order
			n.release()
		}
	}()

	// This run of the process, in the serf tags and on backup frames: a
	// node restarted under the same name is told apart from its last run.
	boot := strconv.FormatUint(rand.Uint64(), 36)
	gcfg.Boot = boot
	if gcfg.Fast {
		// A node of a test cluster is ready soon after its seed appears.
		gcfg.JoinBackoffMax = time.Second
	}
	gcfg.Logger = logger.With("component", "gossip")
	// Serf answers from here on, before the raft stores are open and
	// their tags set (newKeySpace): until then the node tells the
	// others it may have raft state, so none bootstraps without it.
	gcfg.Tags = raftnode.PendingTags()
	if n.members, err = gossip.New(gcfg); err != nil {
		return nil, err
	}
	if err = n.members.RegisterMetrics(providers.MeterProvider()); err != nil {
		return nil, fmt.Errorf("gossip metrics: %w", err)
	}

	pcfg := cfg.peerConfig(peerCreds)
	pcfg.Logger = logger.With("component", "peer")
	pcfg.ServerOptions = kv.MessageBufferOptions() // forward frames are large: their buffers are not cleared either
	if n.peer, err = peer.NewServer(pcfg); err != nil {
		return nil, err
	}

	n.clickhouse = chSettings
	dcfg := cfg.dispatchConfig()
	dcfg.Boot = boot
	dcfg.PeerCredentials = peerCreds
	dcfg.ClickHouse = n.clickhouse.get
	dcfg.ClickHouseTLS = n.clickhouse.tlsConfig
	dcfg.ClickHouseOptions = n.clickhouse.options
	dcfg.ClickHouseTables = n.clickhouse.tables
	dcfg.Meter = providers.MeterProvider()
	dcfg.Tracer = providers.TracerProvider()
	dcfg.Logger = logger.With("component", "dispatch")
	dcfg.OnNoSpace = n.raiseNoSpace                           // n.kv is set before anything puts
	dcfg.OnLogFailed = func(err error) { n.logFailed <- err } // once
	if n.queues, err = dispatch.New(dcfg); err != nil {
		return nil, err
	}

	kcfg := cfg.kvConfig(clientCreds)
	if tlsSrc.client != nil {
		kcfg.GatewayTLS = tlsSrc.client.ServerConfig()
	}
	if kcfg.JWT, err = cfg.jwtTokens(); err != nil {
		return nil, fmt.Errorf("--auth-token: %w", err)
	}
	kcfg.Logger = logger.With("component", "kv")
	kcfg.Meter = providers.MeterProvider()
	if tp := providers.TracerProvider(); tp != nil {
		kcfg.Tracer, kcfg.Propagator = tp, providers.Propagator()
	}
	members := &memberList{m: n.members}
	kcfg.Members = members
	kcfg.Queues = n.queues
	// gRPC's health service answers as /readyz; n.ready is set below,
	// before the server starts.
	kcfg.Ready = func() bool { return len(n.ready.missing()) == 0 }
	if n.kv, err = kv.New(kcfg); err != nil {
		return nil, err
	}
	if n.keySpace, err = newKeySpace(cfg, n.kv, n.members, n.peer, peerCreds, logger); err != nil {
		return nil, err
	}
	members.learners = n.keySpace.learners
	n.ready = n.newReadiness()

	if cfg.MetricsListen != "" {
		ln, lerr := net.Listen("tcp", cfg.MetricsListen)
		if lerr != nil {
			return nil, fmt.Errorf("metrics listener %s: %w", cfg.MetricsListen, lerr)
		}
		var tlsCfg *tls.Config
		if n.tls.metrics != nil {
			tlsCfg = n.tls.metrics.ServerConfig()
		}
		n.serveHTTP(ln, n.opsHandler(), tlsCfg)
		logger.Info("serving metrics", "addr", ln.Addr().String(), "tls", tlsCfg != nil)
	}
	for _, raw := range cfg.ListenMetricsURLs {
		u, perr := url.Parse(raw) // Validate checked it
		if perr != nil {
			return nil, fmt.Errorf("--listen-metrics-urls %q: %w", raw, perr)
		}
		ln, lerr := net.Listen("tcp", u.Host)
		if lerr != nil {
			return nil, fmt.Errorf("--listen-metrics-urls %s: %w", raw, lerr)
		}
		var tlsCfg *tls.Config
		if u.Scheme == "https" {
			tlsCfg = n.tls.client.ServerConfig() // Validate asked for a client certificate
		}
		n.serveHTTP(ln, n.etcdMetricsHandler(), tlsCfg)
		logger.Info("serving etcd's metrics endpoints", "url", raw, "addr", ln.Addr().String())
	}
	return n, nil
}

// serveHTTP serves h on ln, in TLS when tlsCfg is not nil, until
// shutdown; the error Serve returns goes to httpErr.
func (n *node) serveHTTP(ln net.Listener, h http.Handler, tlsCfg *tls.Config) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	n.servers = append(n.servers, srv)
	n.serving++
	go func() {
		if tlsCfg != nil {
			n.httpErr <- srv.ServeTLS(ln, "", "")
			return
		}
		n.httpErr <- srv.Serve(ln)
	}()
}

// etcdMetricsHandler serves what etcd serves on --listen-metrics-urls:
// /metrics, and /health as on the client URLs; /livez and /readyz are
// this node's /healthz and /readyz. Nothing else: /status and the
// profiles stay on --metrics-listen.
func (n *node) etcdMetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.providers.MetricsHandler())
	mux.Handle("GET /health", n.kv.HealthHandler())
	mux.HandleFunc("GET /readyz", n.serveReadyz)
	mux.HandleFunc("GET /livez", serveHealthz)
	return mux
}

// serveHealthz answers /healthz (and /livez): the process serves.
func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte("ok\n"))
}

// serveReadyz answers /readyz: 200, or 503 saying what the node lacks.
func (n *node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if missing := n.ready.missing(); len(missing) > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, reason(missing))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// raiseNoSpace raises etcd's NOSPACE alarm when the queue log's disk or
// --quota-backend-bytes refused a put, as etcd does when its backend
// passes its quota: every member then refuses growing writes until
// `etcdctl alarm disarm`. It runs on the put that failed, which waits for
// the alarm's write at most a few seconds (once: a raised alarm returns
// at once).
func (n *node) raiseNoSpace() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.kv.RaiseNoSpace(ctx); err != nil {
		n.log.Warn("NOSPACE alarm not raised", "err", err)
	}
}

// release stops what newNode built before it failed: nothing serves yet,
// so there is nothing to hand over or wait for.
func (n *node) release() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, srv := range n.servers {
		_ = srv.Close()
	}
	if n.kv != nil {
		_ = n.kv.Shutdown(ctx)
	}
	if n.queues != nil {
		_ = n.queues.Shutdown(ctx)
	}
	if n.keySpace != nil {
		_ = n.keySpace.shutdown(ctx)
	}
	if n.peer != nil {
		_ = n.peer.Shutdown(ctx)
	}
	if n.members != nil { // serf is bound: release it
		_ = n.members.Shutdown()
	}
	_ = n.providers.Shutdown(ctx)
}

// start starts the queues, then serves the etcd API, then the peer link
// (replication and the queues' service), then joins the cluster. The
// queues come first: a put served before they had the key space was
// taken as if this member dispatched every queue (and read their
// fields unsynchronized). Their claims wait for a raft leader.
func (n *node) start() error {
	n.queues.Start(n.kv, n.members)
	if err := n.kv.Start(); err != nil {
		return err
	}
	n.peer.RegisterService(&peerpb.Queues_ServiceDesc, n.queues.PeerService())
	if err := n.peer.Start(); err != nil {
		return err
	}
	if err := n.keySpace.start(); err != nil {
		return err
	}
	events, stop := n.members.Subscribe(256)
	n.stopEvents = stop
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.followMembers(events)
	}()
	n.members.Start()
	return nil
}

// followMembers logs members coming and going, until the subscription
// ends.
func (n *node) followMembers(events <-chan gossip.Event) {
	for ev := range events {
		switch ev.Type {
		case gossip.EventFailed, gossip.EventLeave:
			n.log.Info("member gone", "name", ev.Member.Name, "status", ev.Member.Status.String())
		case gossip.EventJoin:
			n.log.Info("member joined", "name", ev.Member.Name)
		}
	}
}

// shutdown stops everything in order, each step bounded; it returns the
// errors of the steps that failed.
func (n *node) shutdown() error {
	deadline := time.Now().Add(shutdownTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var errs []error
	if n.ready != nil {
		n.ready.leaving.Store(true) // /readyz and gRPC health: not serving
	}
	// Queues go to other members while this one still serves and gossips;
	// producers connected here keep going, forwarded to the new
	// dispatchers.
	// A node whose gossip stopped on its own is no member any more (it
	// may share its name and id with a running one): handing queues over
	// in its name could move the other node's, so the others take them
	// over as after a crash.
	member := !gossipStopped(n.members)
	if member {
		hctx, hcancel := context.WithTimeout(ctx, handoffTimeout)
		if err := n.queues.Handoff(hctx); err != nil {
			errs = append(errs, err)
		}
		hcancel()
		// The raft leadership's hand-over gets what the queues' left, less
		// what serf's leave and the stops after it need: a hand-over that
		// took every second left them an expired context, and the node
		// left gossip as a failure, exiting 1.
		if d := min(leaveTimeout, time.Until(deadline)-shutdownReserve); d > 0 {
			lctx, lcancel := context.WithTimeout(ctx, d)
			n.keySpace.handOver(lctx)
			lcancel()
		}
	}
	if err := n.members.Leave(ctx); err != nil {
		errs = append(errs, fmt.Errorf("gossip leave: %w", err))
	} else if member {
		// Raft keeps running until the leader took this voter out, up
		// to a second before the deadline.
		rctx, rcancel := context.WithDeadline(ctx, deadline.Add(-time.Second))
		n.keySpace.awaitRemoval(rctx)
		rcancel()
	}
	// The etcd API stops before raft: requests in flight end with their
	// answer. Raft stops before the peer listener that carries it.
	errs = append(errs, n.kv.Shutdown(ctx), n.queues.Shutdown(ctx), n.keySpace.shutdown(ctx), n.peer.Shutdown(ctx))
	if err := n.members.Shutdown(); err != nil {
		errs = append(errs, err)
	}
	if n.stopEvents != nil {
		n.stopEvents()
	}
	n.wg.Wait()
	for _, srv := range n.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for ; n.serving > 0; n.serving-- {
		if err := <-n.httpErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	if err := n.providers.Shutdown(ctx); errors.Is(err, chuteotel.ErrSpansLost) {
		n.log.Warn("telemetry not flushed", "err", err)
	} else if err != nil {
		errs = append(errs, err)
	}
	n.log.Info("stopped")
	return errors.Join(errs...)
}

// gossipStopped reports whether m's serf stopped on its own.
func gossipStopped(m *gossip.Membership) bool { return isClosed(m.Stopped()) }

// memberList answers etcd's MemberList from gossip, the alive members,
// and raft: a member that is a non-voter is a learner, as in etcd.
type memberList struct {
	m        *gossip.Membership
	learners func() map[uint64]bool // set once the key space is open
}

func (l *memberList) Members() []*pb.Member {
	alive := l.m.Alive()
	var learners map[uint64]bool
	if l.learners != nil {
		learners = l.learners()
	}
	out := make([]*pb.Member, len(alive))
	for i, m := range alive {
		out[i] = &pb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: learners[m.ID]}
	}
	return out
}

// RemoveMember forces a failed member out of the membership: etcdctl
// member remove.
func (l *memberList) RemoveMember(id uint64) error {
	switch err := l.m.RemoveFailed(id); {
	case err == nil:
		return nil
	case errors.Is(err, gossip.ErrUnknownMember):
		return rpctypes.ErrGRPCMemberNotFound
	case errors.Is(err, gossip.ErrMemberAlive):
		return status.Error(codes.FailedPrecondition, "chute: "+strings.TrimPrefix(err.Error(), "gossip: "))
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

// opsHandler serves the operator endpoints of the metrics listener.
func (n *node) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", serveHealthz)
	mux.HandleFunc("GET /readyz", n.serveReadyz)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(n.status())
	})
	// The whole cluster, gathered from every alive member over the peer
	// link; /status stays this node's own view, which tools sum over nodes.
	mux.HandleFunc("GET /status/cluster", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(n.clusterStatus(r.Context()))
	})
	mux.Handle("GET /metrics", n.providers.MetricsHandler())
	handleProfiles(mux)
	return mux
}

func (n *node) status() nodestatus.Node {
	local := n.members.Local()
	qs := n.queues.Status()
	st := nodestatus.Node{Name: local.Name, Member: gossip.ID(local.ID).String(), Version: version, Queues: qs.Queues, Backups: qs.Backups,
		ClickHouseServers: qs.ClickHouseServers}
	for _, m := range n.members.Members() {
		st.Members = append(st.Members, nodestatus.Member{Name: m.Name, ID: gossip.ID(m.ID).String(), Status: m.Status.String(), PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			RaftCluster: m.Tags[raftnode.TagCluster]})
	}
	if st.Queues == nil {
		st.Queues = []dispatch.QueueStatus{}
	}
	return st
}
