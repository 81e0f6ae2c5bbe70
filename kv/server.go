package kv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"chute/kv/mvcc"
	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// initialRaftTerm is the term headers carry until a command is applied;
// a member alone stays at it.
const initialRaftTerm = 1

// streamWorkers is the size of the gRPC server's pool of call workers:
// about the concurrent calls of a busy node. Idle, each costs a goroutine
// and its stack.
const streamWorkers = 256

// Server serves the etcd v3 API over one store: KV, Watch, Lease,
// Maintenance, Cluster and Auth, on every client URL.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store *mvcc.Store
	sm    *mvcc.StateMachine
	grpc  *grpc.Server
	now   func() time.Time // the store's clock: lease deadlines

	consensus     Consensus     // nil: this member alone applies its writes; set before Start
	localMu       sync.Mutex    // serialises the writes of a member alone
	checkpoints   checkpoints   // renewals waiting for their checkpoint (leader.go)
	leaderStreams leaderStreams // running streams that require a leader (requireleader.go)
	raising       chan struct{} // one token: one RaiseNoSpace proposes at a time

	mu            sync.Mutex // guards listeners, splits, gw and started
	listeners     []net.Listener
	httpListeners []net.Listener   // ListenClientHTTPURLs: the gateway's alone
	splits        []*splitListener // the http:// URLs, shared with the gateway
	gw            *gateway         // nil: Config.NoGateway, or not started
	started       bool

	ready    atomic.Bool
	synced   atomic.Bool   // the key space caught up with the cluster's once since Start
	stop     chan struct{} // closed by Shutdown; ends the owned loops
	stopOnce sync.Once
	wg       sync.WaitGroup // the owned loops and serve goroutines
}

// New builds a server from cfg. It binds nothing until Start.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	now := time.Now
	st := mvcc.NewStore(mvcc.Config{
		ClusterID:        cfg.ClusterID,
		MemberID:         cfg.MemberID,
		RaftTerm:         initialRaftTerm,
		HistoryRevisions: cfg.HistoryRevisions,
		Now:              now,
	})
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		store:   st,
		sm:      mvcc.NewStateMachine(st),
		now:     now,
		raising: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	m, err := newRPCMetrics(cfg.Meter)
	if err != nil {
		return nil, err
	}
	z := &authorizer{auth: s.sm.Auth(), jwt: cfg.JWT, store: st, queues: cfg.Queues, now: now, certUsers: cfg.ClientCertAuth}
	lim := limits{maxTxnOps: cfg.MaxTxnOps, maxKeyBytes: cfg.MaxKeyBytes, keySets: &sync.Pool{}}
	if q := cfg.Queues; q != nil {
		lim.produces = func(key []byte) bool { return q.Route(key) == RouteProduce }
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRequestBytes + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             cfg.KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveInterval, Timeout: cfg.KeepaliveTimeout}),
		grpc.ChainUnaryInterceptor(m.unary, requestSizeLimit(cfg.MaxRequestBytes), s.requireLeaderUnary, z.unary),
		grpc.ChainStreamInterceptor(m.stream, s.requireLeaderStream, z.stream),
		// Calls run on a pool of long-lived workers: a goroutine per call
		// grows its stack from scratch every time (runtime.copystack stood
		// out in profiles with 100 clients). Calls beyond the
		// pool get a goroutine of their own, as without it.
		grpc.NumStreamWorkers(streamWorkers),
	}
	opts = append(opts, messageBufferOptions(detaches(cfg.Queues))...)
	if cfg.Tracer != nil {
		opts = append(opts, grpc.StatsHandler(tracingHandler(cfg.Tracer, cfg.Propagator)))
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(mixedCredentials{tls: cfg.TLS}))
	}
	s.grpc = grpc.NewServer(opts...)
	kvs := &kvService{srv: s, store: st, limits: lim, queues: cfg.Queues}
	leases := &leaseService{srv: s, store: st, minTTL: cfg.MinLeaseTTL, wg: &s.wg, stop: s.stop}
	s.grpc.RegisterService(kvServiceDesc(), kvs)
	pb.RegisterWatchServer(s.grpc, &watchService{store: st, queues: cfg.Queues, authz: z, wg: &s.wg, stop: s.stop, maxBytes: cfg.MaxRequestBytes})
	pb.RegisterLeaseServer(s.grpc, leases)
	r := &recipes{srv: s, kv: kvs, lease: leases, z: z}
	v3lockpb.RegisterLockServer(s.grpc, &lockService{r: r})
	v3electionpb.RegisterElectionServer(s.grpc, &electionService{r: r})
	pb.RegisterMaintenanceServer(s.grpc, &maintenanceService{srv: s, store: st, memberID: cfg.MemberID, version: APIVersion})
	pb.RegisterAuthServer(s.grpc, &authService{srv: s, store: st, auth: s.sm.Auth(), cost: cfg.BcryptCost, ttl: cfg.AuthTokenTTL, jwt: cfg.JWT, now: now})
	pb.RegisterClusterServer(s.grpc, &clusterService{store: st, members: s.members, remover: cfg.Members})
	healthpb.RegisterHealthServer(s.grpc, &healthService{srv: s})
	return s, nil
}

// StateMachine returns the key space as the consensus applies it.
func (s *Server) StateMachine() *mvcc.StateMachine { return s.sm }

// SetConsensus makes every write a command proposed through c, and
// every linearizable read wait for c's read index. Call it before Start;
// without it this member alone applies its writes.
func (s *Server) SetConsensus(c Consensus) {
	s.consensus = c
	s.store.DisableAutoCompaction()
	s.sm.SetRecordRenewal(s.recordRenewal)
}

// Start binds every client URL and serves them. It fails, binding nothing,
// if any URL cannot be bound.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("kv: server already started")
	}
	lns, err := bindAll(s.cfg.ListenClientURLs, func(ln net.Listener) (net.Listener, error) { return tlsListener{ln}, nil })
	if err != nil {
		return err
	}
	// The gateway's own URLs: https:// ones in TLS that offers HTTP/1.1
	// alone.
	httpLns, err := bindAll(s.cfg.ListenClientHTTPURLs, func(ln net.Listener) (net.Listener, error) {
		if s.cfg.GatewayTLS == nil {
			return nil, errors.New("kv: an https:// client http url needs GatewayTLS")
		}
		return tls.NewListener(ln, withALPN(s.cfg.GatewayTLS, "http/1.1")), nil
	})
	if err != nil {
		closeAll(lns)
		return err
	}
	if !s.cfg.NoGateway {
		g, err := newGateway(s)
		if err != nil {
			closeAll(lns)
			closeAll(httpLns)
			return fmt.Errorf("kv: json gateway: %w", err)
		}
		s.gw = g
		s.serveGRPC(g.mem)
	}
	s.listeners = lns
	s.httpListeners = httpLns
	s.started = true
	for _, ln := range httpLns {
		s.serveGateway(ln)
		s.log.Info("serving etcd api's json gateway", "addr", ln.Addr().String(), "path", gatewayPrefix)
	}
	for _, ln := range lns {
		tl, secure := ln.(tlsListener)
		if s.gw == nil || len(httpLns) > 0 || secure && s.cfg.GatewayTLS == nil {
			s.serveGRPC(ln)
			s.log.Info("serving etcd api", "addr", ln.Addr().String())
			continue
		}
		var sp *splitListener
		if secure {
			sp = newSplitListener(tl.Listener, s.cfg.GatewayTLS)
		} else {
			sp = newSplitListener(ln, nil)
		}
		s.splits = append(s.splits, sp)
		s.serveGRPC(sp.grpc)
		s.serveGateway(sp.http)
		s.log.Info("serving etcd api", "addr", ln.Addr().String(), "json_gateway", gatewayPrefix)
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.store.RunWatchLoops(s.stop, s.cfg.WatchSyncInterval, s.cfg.WatchProgressInterval)
	}()
	go func() {
		defer s.wg.Done()
		if s.consensus != nil {
			s.runLeader()
		} else {
			s.runLeaseExpiry()
		}
	}()
	if s.consensus == nil {
		s.synced.Store(true)
	} else {
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			s.runSync()
		}()
		go func() {
			defer s.wg.Done()
			s.runLeaderStreams()
		}()
	}
	s.ready.Store(true)
	return nil
}

// serveGRPC serves the etcd API's gRPC on ln until the server stops.
func (s *Server) serveGRPC(ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("client listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// bindAll binds every URL of urls, an https:// one's listener wrapped by
// secure. It fails, binding nothing, if any cannot be bound.
func bindAll(urls []string, secure func(net.Listener) (net.Listener, error)) ([]net.Listener, error) {
	var lns []net.Listener
	for _, u := range urls {
		addr, https, err := listenAddr(u)
		if err != nil {
			closeAll(lns)
			return nil, err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll(lns)
			return nil, fmt.Errorf("kv: listen on %s: %w", u, err)
		}
		if https {
			wrapped, err := secure(ln)
			if err != nil {
				_ = ln.Close()
				closeAll(lns)
				return nil, err
			}
			ln = wrapped
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// serveGateway serves the JSON gateway on ln until the server stops.
func (s *Server) serveGateway(ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.gw.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("client listener stopped serving the json gateway", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// HTTPAddrs returns the bound addresses of ListenClientHTTPURLs, in
// their order.
func (s *Server) HTTPAddrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return addrsOf(s.httpListeners)
}

// ClientAddrs returns the bound client addresses, in the order of
// ListenClientURLs; useful when a URL asked for port 0.
func (s *Server) ClientAddrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return addrsOf(s.listeners)
}

func addrsOf(lns []net.Listener) []net.Addr {
	addrs := make([]net.Addr, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr()
	}
	return addrs
}

// Ready reports whether the server is serving and not shutting down.
func (s *Server) Ready() bool { return s.ready.Load() }

// Shutdown stops taking new RPCs, lets running ones finish until ctx ends,
// then cuts the rest and waits for every goroutine it started. It is safe to
// call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Lock()
	g, splits := s.gw, s.splits
	s.mu.Unlock()
	if g != nil {
		// First, so that its calls end as HTTP answers rather than as
		// a connection the gRPC server cut.
		g.shutdown(ctx)
	}
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	for _, sp := range splits {
		sp.close()
	}
	s.wg.Wait()
	return nil
}

// runLeaseExpiry revokes expired leases, for a member alone, until the
// server stops.
func (s *Server) runLeaseExpiry() {
	t := time.NewTicker(s.cfg.LeaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if n := s.store.ExpireLeases(); n > 0 {
				s.log.Debug("leases expired", "count", n)
			}
		}
	}
}

// members answers MemberList: the configured membership, or this member.
func (s *Server) members() []*pb.Member {
	if s.cfg.Members != nil {
		return s.cfg.Members.Members()
	}
	clientURLs := s.cfg.AdvertiseClientURLs
	if len(clientURLs) == 0 || hasZeroPort(clientURLs) {
		clientURLs = nil
		for _, a := range s.ClientAddrs() {
			clientURLs = append(clientURLs, "http://"+a.String())
		}
	}
	return []*pb.Member{{
		ID:         s.cfg.MemberID,
		Name:       s.cfg.Name,
		PeerURLs:   s.cfg.AdvertisePeerURLs,
		ClientURLs: clientURLs,
	}}
}

func hasZeroPort(urls []string) bool {
	for _, u := range urls {
		if p, err := url.Parse(u); err == nil && p.Port() == "0" {
			return true
		}
	}
	return false
}

// listenAddr returns the host:port of a client URL, and whether it is
// https.
func listenAddr(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("kv: client url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("kv: client url %q: scheme must be http or https", raw)
	}
	if u.Port() == "" {
		return "", false, fmt.Errorf("kv: client url %q: port missing", raw)
	}
	return u.Host, u.Scheme == "https", nil
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
}
