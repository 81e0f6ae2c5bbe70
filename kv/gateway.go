package kv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// gatewayPrefix is the path under which etcd's JSON gateway answers;
// gatewayBetaPrefix the one etcd 3.3 used, which 3.4 still served.
const (
	gatewayPrefix     = "/v3/"
	gatewayBetaPrefix = "/v3beta/"
)

// Bounds of the gateway's HTTP side. A JSON body carries keys and values in
// base64 (4 bytes for 3) besides the field names, so it may be twice the
// gRPC request it becomes; the gRPC limits still apply to that request.
const (
	gatewayHeaderTimeout = 10 * time.Second
	gatewayIdleTimeout   = 2 * time.Minute
	gatewayMaxHeader     = 64 << 10
	gatewayBufconnBytes  = 1 << 20
	// sniffTimeout bounds how long a new connection on a client URL may
	// take to send the bytes that say which protocol it speaks.
	sniffTimeout = 10 * time.Second
)

// gateway is etcd's JSON gateway: the HTTP/1.1 handlers grpc-gateway
// generates (etcd's api module's for POST /v3/kv/put, /v3/kv/range,
// /v3/watch, ...; v3lockpb's and v3electionpb's for /v3/lock/* and
// /v3/election/*), answering through a connection to this server's own
// gRPC server held in memory, so that every call passes the same
// interceptors (size limits, leader check, auth, metrics, tracing) as a
// gRPC client's.
type gateway struct {
	mem  *bufconn.Listener
	conn *grpc.ClientConn
	srv  *http.Server
}

// newGateway builds the gateway of s; Start serves its HTTP server on the
// client URLs' connections and its gRPC side on mem.
func newGateway(s *Server) (*gateway, error) {
	mem := bufconn.Listen(gatewayBufconnBytes)
	conn, err := grpc.NewClient("passthrough:///chute-gateway",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return mem.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	)
	if err != nil {
		_ = mem.Close()
		return nil, err
	}
	maxBody := 2*int64(s.cfg.MaxRequestBytes) + grpcOverheadBytes
	js := gatewayJSON{JSONPb: &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}, maxValue: maxBody}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{Marshaler: js}),
		runtime.WithIncomingHeaderMatcher(gatewayHeader),
		runtime.WithErrorHandler(gatewayError),
		// No such path, or not a POST: plain text, as etcd 3.4's.
		runtime.WithRoutingErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, code int) {
			http.Error(w, http.StatusText(code), code)
		}),
	)
	ctx := context.Background()
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gw.RegisterKVHandler, gw.RegisterWatchHandler, gw.RegisterLeaseHandler,
		gw.RegisterClusterHandler, gw.RegisterMaintenanceHandler, gw.RegisterAuthHandler,
		v3lockpb.RegisterLockHandler, v3electionpb.RegisterElectionHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			_ = conn.Close()
			_ = mem.Close()
			return nil, err
		}
	}
	// A unary call's body is bounded as a whole; a stream's (watch,
	// keep-alive) per request (gatewayJSON.maxValue), and its first
	// request is checked before the stream starts (streamEntry).
	unary := http.MaxBytesHandler(mux, maxBody)
	streams := map[string]http.Handler{
		gatewayPrefix + "watch":           streamEntry(mux, js, func() proto.Message { return &pb.WatchRequest{} }),
		gatewayPrefix + "lease/keepalive": streamEntry(mux, js, func() proto.Message { return &pb.LeaseKeepAliveRequest{} }),
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, ok := streams[r.URL.Path]; ok {
			st.ServeHTTP(w, r)
			return
		}
		unary.ServeHTTP(w, r)
	})
	h := http.NewServeMux()
	h.Handle(gatewayPrefix, api)
	// etcd 3.4 still answered its 3.3 clients under /v3beta/ (3.5
	// dropped it): the same handlers.
	h.Handle(gatewayBetaPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.URL.Path = gatewayPrefix + strings.TrimPrefix(r.URL.Path, gatewayBetaPrefix)
		r.URL.RawPath = ""
		api.ServeHTTP(w, r)
	}))
	h.HandleFunc("/version", getOnly(serveVersion))
	h.Handle("/health", s.HealthHandler())
	return &gateway{
		mem:  mem,
		conn: conn,
		srv: &http.Server{
			Handler:           noBrowsers(h),
			ReadHeaderTimeout: gatewayHeaderTimeout,
			IdleTimeout:       gatewayIdleTimeout,
			MaxHeaderBytes:    gatewayMaxHeader,
			// net/http's own complaints (a bad request line, a
			// handler's panic) at debug: a client can cause them.
			ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		},
	}, nil
}

// gatewayHeader is the gateway's incoming header matcher: grpc-gateway's
// (Authorization, Grpc-Metadata-*, and standard headers under a prefix),
// and the W3C trace context headers as they are, so that a producer's
// trace goes on through the call as it does from gRPC metadata.
func gatewayHeader(h string) (string, bool) {
	switch k := strings.ToLower(h); k {
	case "traceparent", "tracestate", "baggage":
		return k, true
	}
	return runtime.DefaultHeaderMatcher(h)
}

// getOnly answers anything but a GET (or HEAD) 405, as etcd's /version
// and /health do.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}
}

// serveVersion answers etcd's GET /version: the etcd API level chute
// answers as (APIVersion, Status's version), for the server and the
// cluster. Gateway clients read it to pick their path prefix.
func serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"etcdserver": APIVersion, "etcdcluster": APIVersion})
}

// healthTimeout bounds /health's linearizable read, as etcd bounds its.
const healthTimeout = time.Second

// HealthHandler serves etcd's /health (GET alone): on the client URLs,
// and on other listeners of the node (etcd's --listen-metrics-urls).
func (s *Server) HealthHandler() http.Handler { return getOnly(s.serveHealth) }

// serveHealth answers etcd's GET /health as etcd 3.4 decides it: false
// (503) while an alarm is raised, while this member knows no leader, or
// when a linearizable read does not come back within healthTimeout;
// true (200) otherwise. The reason is etcd 3.5's field.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	reason := ""
	alarms := s.store.Alarms(pb.AlarmType_NONE)
	switch {
	case !s.Ready():
		reason = "STOPPING"
	case len(alarms) > 0:
		reason = "ALARM " + alarms[0].Alarm.String()
	case s.hasNoLeader():
		reason = "RAFT NO LEADER"
	default:
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := s.linearize(ctx); err != nil {
			reason = "QGET ERROR:" + err.Error()
		}
	}
	if reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"health": "false", "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"health": "true", "reason": ""})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// noBrowsers refuses a request that a web browser sent on a page's
// behalf: one with an Origin header, which browsers add to every POST
// and to every cross-origin request, and producers (curl, PHP, gRPC-less
// services) do not send. Without it, any page a user of the node's
// machine opens could put and delete keys through the gateway with a
// form or fetch() (a "simple" cross-origin POST needs no preflight),
// also by DNS rebinding to 127.0.0.1. chute takes no --cors to allow
// some origins: it refuses the flag.
func noBrowsers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			gatewayError(r.Context(), nil, nil, w, r, status.Error(codes.PermissionDenied,
				"etcdserver: requests from web pages (an Origin header) are refused by chute's gateway"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// gatewayError writes a failed call's answer as etcd 3.4's gateway did
// (grpc-gateway v1): {"error":M,"message":M,"code":N} with the gRPC
// code's HTTP status, where grpc-gateway v2 leaves "error" out; clients
// written against etcd read it.
func gatewayError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := status.Convert(err)
	writeJSON(w, gatewayStatus(st.Code()), struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Code    int32  `json:"code"`
	}{st.Message(), st.Message(), int32(st.Code())})
}

// gatewayStatus is the HTTP status of a gRPC code as grpc-gateway v1,
// which etcd 3.4's gateway uses, maps it: v2 answers FailedPrecondition
// (a lease that exists, auth enable without root, ...) with 400 and
// Canceled with 499, where clients of etcd see 412 and 408.
func gatewayStatus(c codes.Code) int {
	switch c {
	case codes.FailedPrecondition:
		return http.StatusPreconditionFailed
	case codes.Canceled:
		return http.StatusRequestTimeout
	}
	return runtime.HTTPStatusFromCode(c)
}

// shutdown stops taking requests and waits for those under way until ctx
// ends, then closes what is left and the connection to the gRPC server.
func (g *gateway) shutdown(ctx context.Context) {
	if err := g.srv.Shutdown(ctx); err != nil {
		_ = g.srv.Close()
	}
	_ = g.conn.Close()
}

// splitListener takes the connections of one client URL and hands
// each to gRPC or to the gateway by its first bytes: HTTP/2's client
// preface ("PRI * HTTP/2.0...", which every gRPC client sends first) goes
// to gRPC, anything else to the gateway's HTTP/1.1 server, as etcd's
// client port does. The bytes are peeked, not read, so gRPC gets the
// connection as accepted (its reads go straight to the socket).
//
// On an https:// URL the listener makes the TLS handshake itself, offering
// "http/1.1" before "h2" (ALPN, RFC 7301; the server's order decides): a
// gRPC client offers h2 alone and gets it, curl and browsers offer both
// and get HTTP/1.1. An h2 connection goes to gRPC, handshake done, the
// rest to the gateway.
type splitListener struct {
	ln   net.Listener
	tls  *tls.Config // nil: plain
	grpc *chanListener
	http *chanListener
	wg   sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // being told apart; nil once closed
}

// newSplitListener splits ln's connections, each in TLS of tlsConfig
// when it is not nil.
func newSplitListener(ln net.Listener, tlsConfig *tls.Config) *splitListener {
	l := &splitListener{ln: ln, grpc: newChanListener(ln.Addr()), http: newChanListener(ln.Addr()),
		pending: make(map[net.Conn]struct{})}
	if tlsConfig != nil {
		l.tls = withALPN(tlsConfig, "http/1.1", "h2")
	}
	l.wg.Add(1)
	go l.run()
	return l
}

// withALPN returns a copy of c, and of the configs its GetConfigForClient
// returns, that offer the ALPN protocols, the first preferred.
func withALPN(c *tls.Config, protocols ...string) *tls.Config {
	protos := func() []string { return slices.Clone(protocols) }
	c = c.Clone()
	c.NextProtos = protos()
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := get(hello)
			if err != nil || cc == nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.NextProtos = protos()
			return cc, nil
		}
	}
	return c
}

// route hands c to gRPC or to the gateway.
func (l *splitListener) route(c net.Conn) {
	l.mu.Lock()
	if l.pending == nil { // closed meanwhile
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	l.pending[c] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.pending, c)
		l.mu.Unlock()
	}()
	if l.tls == nil {
		if isHTTP2(c) {
			l.grpc.hand(c)
		} else {
			l.http.hand(c)
		}
		return
	}
	tc := tls.Server(c, l.tls)
	ctx, cancel := context.WithTimeout(context.Background(), sniffTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	switch {
	case err != nil:
		_ = c.Close() // as gRPC closes a connection whose handshake failed
	case tc.ConnectionState().NegotiatedProtocol == "h2":
		l.grpc.hand(tlsDone{tc})
	default:
		l.http.hand(tc)
	}
}

// run accepts until the listener closes; each connection is told apart
// in a goroutine of its own, so one that sends nothing holds up no other.
func (l *splitListener) run() {
	defer l.wg.Done()
	var pause time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.grpc.close()
				l.http.close()
				return
			}
			// Out of file descriptors and the like: wait and go on, as
			// gRPC's and net/http's servers do.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.route(c)
		}()
	}
}

// close closes the accepting listener, ends both halves, closes the
// connections being told apart and waits for their goroutines.
func (l *splitListener) close() {
	_ = l.ln.Close()
	// A connection still sending its first bytes (or its handshake)
	// would hold this up for as long as sniffTimeout: nobody takes it
	// any more.
	l.mu.Lock()
	for c := range l.pending {
		_ = c.Close()
	}
	l.pending = nil
	l.mu.Unlock()
	l.wg.Wait()
}

// http2Preface is the start of the client preface of HTTP/2 (RFC 9113
// §3.4), which no HTTP/1.x request line starts with.
const http2Preface = "PRI "

// chanListener is one half of a splitListener: the connections handed to
// it, for a server's Serve.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to the server accepting on l, or closes it once l closed.
func (l *chanListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *chanListener) Close() error {
	l.close()
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
