package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Server is a member's peer listener: one gRPC server, with the cluster
// check, bound to every peer URL.
type Server struct {
	cfg  Config
	log  *slog.Logger
	grpc *grpc.Server

	mu        sync.RWMutex // guards listeners
	listeners []net.Listener

	wg sync.WaitGroup // the Serve goroutines
}

var _ grpc.ServiceRegistrar = (*Server)(nil)

// NewServer builds a server; RegisterService adds services to it and
// Start binds it.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	check := newClusterCheck(cfg.ClusterID)
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(check.unary),
		grpc.ChainStreamInterceptor(check.stream),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.ReadBufferSize(BufferBytes),
		grpc.WriteBufferSize(BufferBytes),
		grpc.InitialWindowSize(StreamWindowBytes),
		grpc.InitialConnWindowSize(ConnWindowBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
	}
	if cfg.Credentials != nil {
		opts = append(opts, grpc.Creds(cfg.Credentials))
	}
	return &Server{cfg: cfg, log: log, grpc: grpc.NewServer(append(opts, cfg.ServerOptions...)...)}, nil
}

// RegisterService adds a service to the listener, such as the queues'
// forwarding service. Call it before Start. It implements
// grpc.ServiceRegistrar.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
}

// Start binds the peer URLs and serves the registered services on them.
// It fails, binding nothing, if a URL cannot be bound.
func (s *Server) Start() error {
	var lns []net.Listener
	for _, u := range s.cfg.ListenURLs {
		ln, err := net.Listen("tcp", listenAddr(u))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("peer: listener %s: %w", u, err)
		}
		lns = append(lns, ln)
	}
	s.mu.Lock()
	s.listeners = lns
	s.mu.Unlock()
	for _, ln := range lns {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.log.Error("peer listener stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
		s.log.Info("serving peers", "addr", ln.Addr().String())
	}
	return nil
}

// Addrs returns the bound peer addresses, none before Start.
func (s *Server) Addrs() []net.Addr {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]net.Addr, len(s.listeners))
	for i, ln := range s.listeners {
		out[i] = ln.Addr()
	}
	return out
}

// Shutdown stops the server and waits for its listeners. Calls and
// streams are cut rather than drained: the link's streams are long-lived
// by design, and what they carried is repaired (replication) or held and
// retried by the sender (forwarded messages, raft). It is safe to call
// more than once, and before Start.
func (s *Server) Shutdown(context.Context) error {
	s.grpc.Stop()
	s.wg.Wait()
	return nil
}

// listenAddr returns the host:port of a peer URL Validate accepted.
func listenAddr(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // net.Listen says what is wrong
	}
	return u.Host
}
