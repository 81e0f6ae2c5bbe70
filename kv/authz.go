package kv

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"chute/kv/auth"
	"chute/kv/mvcc"
	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// QueueRecords is what a Queues implements so that, with auth enabled,
// creating a queue by putting to it needs write on the queue's record:
// kv does not parse queue keys.
type QueueRecords interface {
	// RecordKey returns the record key of the queue a producer key puts
	// to, and false for any other key. It is pure and cheap.
	RecordKey(producerKey []byte) (record []byte, ok bool)
}

// openMethods need no user even with auth enabled, as in etcd: logging
// in, asking whether auth is on, the calls clients make to find their
// endpoints, and gRPC's health service (its Watch too, in
// authorizer.stream).
var openMethods = map[string]bool{
	"/etcdserverpb.Auth/Authenticate":    true,
	"/etcdserverpb.Auth/AuthStatus":      true,
	"/etcdserverpb.Maintenance/Status":   true,
	"/etcdserverpb.Cluster/MemberList":   true,
	healthpb.Health_Check_FullMethodName: true,
	healthpb.Health_List_FullMethodName:  true,
}

// alarmList reports whether req asks for the alarms: open, as in etcd
// 3.4, whose health checks (etcdctl endpoint health) read them. Raising
// and disarming one still needs the root role (etcd 3.4 let anyone).
func alarmList(req any) bool {
	r, ok := req.(*pb.AlarmRequest)
	return ok && r.Action == pb.AlarmRequest_GET
}

// authorizer checks every call against the auth state, as etcd does,
// while auth is enabled: the user comes from the call's "token"
// metadata; KV calls need read or write on their keys (read too for the
// previous values a put or delete asks for), a put with a lease and a
// lease revoke write on the lease's keys, a lease's TimeToLive with its
// keys read on them, other lease calls and watches a user (a watch's
// keys are checked as it is created) and compaction a user, and
// everything else (maintenance but the list of alarms, which is open,
// auth and membership changes) the root role.
// It is the outermost check of every service, so a refused call reaches
// neither the store nor Queues.
type authorizer struct {
	auth   *auth.Store
	jwt    *auth.JWT // nil: simple tokens
	store  *mvcc.Store
	queues Queues // nil: no queue namespace
	now    func() time.Time
	// certUsers: a verified client certificate's CN is the caller of a
	// call without a token (Config.ClientCertAuth).
	certUsers bool
}

// user returns the caller of ctx and whether auth is enabled: with auth
// enabled, the user of the call's token, else, with --client-cert-auth
// (certUsers), the CommonName of its verified client certificate
// (tlsUser), else ErrUserEmpty; and
// ErrInvalidToken with a bad token. A certificate's CN that names no
// user is returned as is: every check refuses it (permission denied),
// as etcd does.
func (z *authorizer) user(ctx context.Context) (string, bool, error) {
	if !z.auth.Enabled() {
		return "", false, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	toks := md.Get(rpctypes.TokenFieldNameGRPC)
	if len(toks) == 0 {
		// The JSON gateway's Authorization header, as etcd reads it.
		toks = md.Get(rpctypes.TokenFieldNameSwagger)
	}
	if len(toks) == 0 || toks[0] == "" {
		if cn := tlsUser(ctx); cn != "" && z.certUsers {
			return cn, true, nil
		}
		return "", true, auth.ErrUserEmpty
	}
	verify := z.auth.Verify
	if z.jwt != nil {
		verify = func(tok string, now time.Time) (string, error) { return z.auth.VerifyJWT(z.jwt, tok, now) }
	}
	u, err := verify(toks[0], z.now())
	if err != nil {
		return "", true, err
	}
	return u, true, nil
}

// tlsUser returns the CommonName of the client certificate of ctx's
// connection, as etcd's AuthInfoFromTLS does: only a certificate that
// the server verified against its trusted CA (--client-cert-auth) counts;
// "" for none.
func tlsUser(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	for _, chain := range ti.State.VerifiedChains {
		if len(chain) > 0 && chain[0].Subject.CommonName != "" {
			return chain[0].Subject.CommonName
		}
	}
	return ""
}

// authenticate resolves the caller of a call that is not open and
// names it on the call's span.
func (z *authorizer) authenticate(ctx context.Context) (string, bool, error) {
	u, on, err := z.user(ctx)
	if err == nil && on {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("etcd.user", u))
	}
	return u, on, err
}

func (z *authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if openMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	if alarmList(req) {
		// Open, but a token sent is checked, as etcd does: a client
		// whose token expired learns it here too.
		if _, _, err := z.user(ctx); err != nil && !errors.Is(err, auth.ErrUserEmpty) {
			return nil, toGRPC(err)
		}
		return handler(ctx, req)
	}
	u, on, err := z.authenticate(ctx)
	if err != nil {
		return nil, toGRPC(err)
	}
	if on {
		if ctx, err = z.checked(ctx, u, req); err != nil {
			return nil, toGRPC(err)
		}
	}
	return handler(ctx, req)
}

// checkedBy says who a call was checked for and at which auth revision.
// A write carries it into its command (Server.writeBy), and the apply
// refuses the command if the auth state changed since (as etcd's apply
// does); a read is refused after it if so (Server.authMoved).
type checkedBy struct {
	user string
	rev  uint64
}

type checkedByKey struct{}

// checked checks req of user u (allow) and returns ctx carrying whom it
// checked at which auth revision. The revision is read first: a change
// applied during the check makes the stamp old, never the check.
func (z *authorizer) checked(ctx context.Context, u string, req any) (context.Context, error) {
	rev := z.auth.Revision()
	if err := z.allow(u, req); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, checkedByKey{}, checkedBy{user: u, rev: rev}), nil
}

// checkedFrom returns what checked put in ctx, if it checked its call.
func checkedFrom(ctx context.Context) (checkedBy, bool) {
	c, ok := ctx.Value(checkedByKey{}).(checkedBy)
	return c, ok
}

func (z *authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == healthpb.Health_Watch_FullMethodName {
		return handler(srv, ss)
	}
	u, on, err := z.authenticate(ss.Context())
	if err != nil {
		return toGRPC(err)
	}
	if !on {
		return handler(srv, ss)
	}
	switch info.FullMethod {
	case "/etcdserverpb.Watch/Watch", "/etcdserverpb.Lease/LeaseKeepAlive", "/v3electionpb.Election/Observe":
		// Any user; a watch's keys are checked as it is created, and
		// Observe's reads as the caller's (svc_recipes.go).
	case "/etcdserverpb.KV/RangeStream":
	default:
		if !z.auth.IsRoot(u) {
			return toGRPC(auth.ErrPermissionDenied)
		}
	}
	return handler(srv, &authStream{ServerStream: ss, z: z, user: u})
}

// authStream checks the range requests a stream receives (RangeStream's)
// and the leases a keep-alive stream renews (allowKeepAlive). A range
// request checked, its context says so (checked), as a unary call's
// does: the read then answers as Range does, where without it the read
// took the call for one let through with auth off (Server.authMoved)
// and refused every RangeStream with "user name is empty".
type authStream struct {
	grpc.ServerStream
	z    *authorizer
	user string
	ctx  context.Context // nil until a range request is checked
}

func (s *authStream) Context() context.Context {
	if s.ctx != nil {
		return s.ctx
	}
	return s.ServerStream.Context()
}

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	switch r := m.(type) {
	case *pb.RangeRequest:
		ctx, err := s.z.checked(s.ServerStream.Context(), s.user, r)
		if err != nil {
			return toGRPC(err)
		}
		s.ctx = ctx
		return nil
	case *pb.LeaseKeepAliveRequest:
		return toGRPC(s.z.allowKeepAlive(s.user, r.ID))
	}
	return nil
}

// allow checks a unary request of user.
func (z *authorizer) allow(u string, req any) error {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return z.auth.Check(u, r.Key, r.RangeEnd, auth.Read)
	case *pb.PutRequest:
		return z.allowPut(u, r)
	case *pb.DeleteRangeRequest:
		return z.allowDelete(u, r)
	case *pb.TxnRequest:
		return z.allowTxn(u, r)
	case *pb.LeaseRevokeRequest:
		return z.allowLeaseKeys(u, r.ID, auth.Write)
	case *pb.LeaseTimeToLiveRequest:
		if r.Keys {
			// Names of keys are theirs to read (etcd 3.4.26, 3.5.9:
			// CVE-2023-32082).
			return z.allowLeaseKeys(u, r.ID, auth.Read)
		}
		return nil
	case *pb.LeaseLeasesRequest:
		return z.allowLeaseList(u)
	case *pb.LeaseGrantRequest:
		return nil
	case *pb.CompactionRequest:
		return nil // any user, as in etcd (Kubernetes' API server compacts as its own)
	case *v3lockpb.LockRequest, *v3lockpb.UnlockRequest, *v3electionpb.CampaignRequest,
		*v3electionpb.ProclaimRequest, *v3electionpb.ResignRequest, *v3electionpb.LeaderRequest:
		return nil // any user: each of the recipe's steps is checked (svc_recipes.go)
	case *pb.AuthUserGetRequest:
		if r.Name == u {
			return nil // a user may read itself, as in etcd 3.5
		}
	case *pb.AuthRoleGetRequest:
		if roles, err := z.auth.User(u); err == nil && slices.Contains(roles, r.Role) {
			return nil // and the roles it holds
		}
	}
	if !z.auth.IsRoot(u) {
		return auth.ErrPermissionDenied
	}
	return nil
}

// allowLeaseKeys checks access a on every key attached to lease id; a
// lease that does not exist passes, for the handler to answer.
func (z *authorizer) allowLeaseKeys(u string, id int64, a auth.Access) error {
	return mvcc.LeaseKeysAllowed(z.store, z.auth, u, id, a)
}

// allowLeaseList checks a LeaseLeases of user u as etcd 3.4.42 and
// later do: root, or read on every key of every lease, so that lease ids
// (which keep a lease alive, or revoke it) are not listed to a user who
// may not see what they hold.
func (z *authorizer) allowLeaseList(u string) error {
	if z.auth.IsRoot(u) {
		return nil
	}
	for _, id := range z.store.LeaseIDs() {
		if err := z.allowLeaseKeys(u, id, auth.Read); err != nil {
			return err
		}
	}
	return nil
}

// allowKeepAlive checks a keep-alive of lease id by user u as etcd
// 3.4.42 and later do: root, or write on every key the lease holds.
// Before, any user kept any lease alive, a lock or a leader's key of
// another user's among them, which then never expired.
func (z *authorizer) allowKeepAlive(u string, id int64) error {
	if z.auth.IsRoot(u) {
		return nil
	}
	return z.allowLeaseKeys(u, id, auth.Write)
}

// allowDelete checks a delete: write on its keys, and read on them when
// it asks for their previous values, as in etcd.
func (z *authorizer) allowDelete(u string, r *pb.DeleteRangeRequest) error {
	if r.PrevKv {
		if err := z.auth.Check(u, r.Key, r.RangeEnd, auth.Read); err != nil {
			return err
		}
	}
	return z.auth.Check(u, r.Key, r.RangeEnd, auth.Write)
}

// allowPut checks a put as etcd does: write on its key; read on it when
// it asks for the previous value; with a lease, write on every key the
// lease holds already (etcd's checkLeasePuts: otherwise a user could
// attach a key of its own to another's lease, and its owner could no
// longer revoke it). For a put that would create a queue, write on the
// queue's record too.
func (z *authorizer) allowPut(u string, r *pb.PutRequest) error {
	key := r.Key
	if err := z.auth.Check(u, key, nil, auth.Write); err != nil {
		return err
	}
	if r.PrevKv {
		if err := z.auth.Check(u, key, nil, auth.Read); err != nil {
			return err
		}
	}
	if r.Lease != 0 {
		if err := z.allowLeaseKeys(u, r.Lease, auth.Write); err != nil {
			return err
		}
	}
	qr, ok := z.queues.(QueueRecords)
	if !ok {
		return nil
	}
	rec, ok := qr.RecordKey(key)
	if !ok {
		return nil
	}
	if resp, _, err := z.store.Range(&pb.RangeRequest{Key: rec, CountOnly: true}); err == nil && resp.Count > 0 {
		return nil // the queue exists
	}
	return z.auth.Check(u, rec, nil, auth.Write)
}

// allowTxn checks a txn as etcd does: read on every compare's keys, and
// what each op of both branches needs, nested txns included.
func (z *authorizer) allowTxn(u string, r *pb.TxnRequest) error {
	for _, c := range r.Compare {
		if err := z.auth.Check(u, c.Key, c.RangeEnd, auth.Read); err != nil {
			return err
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				err = z.auth.Check(u, o.RequestRange.Key, o.RequestRange.RangeEnd, auth.Read)
			case *pb.RequestOp_RequestPut:
				err = z.allowPut(u, o.RequestPut)
			case *pb.RequestOp_RequestDeleteRange:
				err = z.allowDelete(u, o.RequestDeleteRange)
			case *pb.RequestOp_RequestTxn:
				err = z.allowTxn(u, o.RequestTxn)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// allowWatch checks a watch's creation on a stream the authorizer let
// through: read on its keys, and write too on a consumer key: a watch
// there consumes the queue (it takes messages from other consumers
// until acknowledged or timed out, records the consumer, may claim the
// queue), which a user who may only read must not do. The reason is
// etcd's for a refused watch: the gRPC error's whole text.
func (z *authorizer) allowWatch(ctx context.Context, cr *pb.WatchCreateRequest) (reason string, ok bool) {
	u, on, err := z.user(ctx)
	if err == nil && on {
		err = z.auth.Check(u, cr.Key, cr.RangeEnd, auth.Read)
	}
	if err == nil && on && len(cr.RangeEnd) == 0 && z.queues != nil && z.queues.Route(cr.Key) == RouteConsumer {
		err = z.auth.Check(u, cr.Key, nil, auth.Write)
	}
	if err != nil {
		return toGRPC(err).Error(), false
	}
	return "", true
}
