// Package kv is chute's etcd: an MVCC key space, kept in memory and
// applied from a raft log kept on disk, and the etcd v3 gRPC services over
// it (KV, Watch, Lease, Maintenance, Cluster, Auth, etcd's Lock and
// Election, and gRPC's health service), served on every client URL.
//
// http:// and https:// client URLs share one gRPC server, as in etcd: the
// listeners of https:// URLs mark their connections, and the server's
// credentials (mixedCredentials) run the TLS handshake, with the
// certificate and client verification of Config.TLS, on marked ones only;
// where the JSON gateway shares the URL, its listener has made the
// handshake already (below), and the credentials take it as it is.
//
// # JSON gateway
//
// Each client URL also answers etcd's JSON gateway, as etcd's does unless
// --enable-grpc-gateway=false (Config.NoGateway): HTTP/1.1 POSTs under
// /v3/, and etcd 3.3's /v3beta/ that etcd 3.4 still served (kv/put,
// kv/range, kv/deleterange, kv/txn, watch, lease/grant,
// auth/authenticate, maintenance/status, ...), with etcd's JSON mapping:
// keys and values in base64, 64-bit numbers as strings, errors as etcd
// 3.4's {"error":M,"message":M,"code":N} with the gRPC code's HTTP status
// (grpc-gateway v2 dropped "error"; gatewayError puts it back), a wrong
// path or method as plain text. GET /version and /health answer as
// etcd's do (serveHealth: false while an alarm is raised, without a
// leader, or when a linearizable read takes over a second).
// The handlers are the ones etcd's api module generates with
// grpc-gateway; they call this server over a connection held in memory
// (gateway.go), so a gateway call passes every interceptor a gRPC call
// does and is counted and traced as one (its traceparent header is the
// span's parent). Producers without gRPC (curl, PHP, shell) put to
// queues this way.
//
// A connection is told apart by its first bytes on an http:// URL
// (HTTP/2's preface, peeked, goes to gRPC) and by the protocol its TLS
// handshake chose on an https:// one: the listener makes the handshake
// itself, offering HTTP/1.1 before h2, so gRPC clients (which offer h2
// alone) get h2 and gRPC, and curl HTTP/1.1 and the gateway. HTTP/2
// requests to the gateway are not served (gRPC takes every h2 connection).
//
// With auth enabled, a gateway call is authenticated by the token in its
// Authorization header (from /v3/auth/authenticate), as in etcd. The CN of
// a client certificate names the user of gRPC calls only: the gateway's
// calls reach gRPC over the in-memory connection, which has none (etcd's
// gateway, which dials its own port with its own certificate, is no
// better). Bodies are bounded at twice the request limit and gRPC's
// margin (base64 inflates), and the request limit then applies to the
// call as to any; headers at 64 KiB, read within 10 s. A request with an
// Origin header, which only browsers send, is refused (noBrowsers): a web
// page must not write the key space through a user's browser.
//
// # Lock and Election
//
// etcd's Lock and Election services (v3lockpb, v3electionpb: etcd's
// protos, the same wire) run clientv3/concurrency's Mutex and Election on
// the server, as etcd's do, for clients whose lock and election APIs call
// them (jetcd, Rust's etcd-client): a holder's key is the name, "/" and
// its lease in hex, the oldest key under the name holds the lock or
// leads, so a clientv3 Mutex and a Lock call exclude each other. Every
// step is a KV call of this server checked as the caller's own
// (svc_recipes.go): locking needs write on the name's keys, as in a
// client. A Lock, Campaign or Proclaim without a lease gets one of 60 s
// that nobody keeps alive, as etcd's does; a caller that gives up while
// waiting leaves no key behind. The errors are etcd's ("election: not
// leader", "election: no leader", and those of their KV steps, all with
// gRPC code Unknown, as etcd's client in the server returns them). The JSON gateway
// serves them at etcd's paths (/v3/lock/lock, /v3/election/campaign,
// ...), from handlers protoc-gen-grpc-gateway generates with the paths
// of etcd's annotations (kept in a YAML file beside each proto).
//
// # Health
//
// gRPC's health service (grpc.health.v1.Health), which etcd registers on
// its client port too, answers for the service name "" only (any other
// is NotFound, as in etcd's): SERVING while the node is ready
// (Config.Ready; cmd/chute's /readyz), NOT_SERVING before and once it
// shuts down, when a Watch gets NOT_SERVING and ends (svc_health.go).
// It needs no user with auth enabled, as etcd's.
//
// # Key space
//
// The key space itself, its revisions, compaction, leases, watchers and
// the state machine that applies the log, is kv/mvcc; its package doc
// describes their rules and locks. kv holds the services over it: each
// handler checks the request (check.go), reads the store or writes a
// command (propose.go), maps the error once (toGRPC) and fills the header.
//
// # Watch streams
//
// Each watch stream has a bounded send queue (sendqueue.go) that the
// store's watchers push to without blocking, and a send loop that writes
// it to the client; a stream's watchers fall behind and catch up from the
// store's history when its client stops reading, so a stuck client stalls
// only its own stream. Watch ids are assigned by the server per stream
// from 0, as etcd does. The stream's lock is taken before the store's.
// A watch created with fragment set gets an answer over
// --max-request-bytes with more than one event in fragments of about
// that size, each but the last marked Fragment, as etcd sends them.
//
// # One ordered log
//
// Every write is a command (mvcc.StateMachine): with a Consensus
// (kv/raftkv, raft over the peer link) it is proposed, forwarded to the
// leader when this member is not, committed by a majority and applied by
// every member in log order, so the cluster has one revision sequence:
// the same mod_revision on every member, watches resumable on any member
// by revision, compaction everywhere at once, HashKV equal at one
// revision.
// Reads are linearizable by default: they wait for the leader's read
// index (a raft barrier, one for all reads waiting) and for this member
// to apply it; serializable reads are served at once from this member.
//
// # Leases
//
// Leases are cluster objects, as in etcd: granted and revoked through the
// log, kept alive at the leader (keep-alives reaching another member are
// forwarded), expired by the leader, which proposes their revoke, and
// checkpointed by it: a renewal is acknowledged once a checkpoint of its
// deadline committed (renewals arriving together share one), so that a
// new leader starts from the deadlines the old one acknowledged
// (leader.go). The leader proposes revokes and checkpoints only through
// its own log, in the term it decided them: a leader resumed after a
// freeze, its deadlines stale, cannot revoke what the next leader kept
// alive, as etcd's old leaders could. TTLs below MinLeaseTTL are
// raised to it (etcd: 2 s with its default timings); expired leases'
// keys are deleted in one revision with DELETE events. KeepAlive on a
// lease that is gone answers TTL 0, TimeToLive answers TTL -1, as etcd.
//
// # Alarms
//
// Alarms are etcd's, kept in the key space's log: Maintenance.Alarm's
// ACTIVATE and DEACTIVATE are commands every member applies in order,
// the alarms are in snapshots, and GET answers at a linearizable point,
// with the alarms of every member. A member raises NOSPACE when its disk
// refuses a write (Server.RaiseNoSpace, for this node's components).
// While any member's NOSPACE alarm is raised, every member refuses, as
// etcd's capped applier does, the writes that grow the data (Put, a Txn
// with a put, LeaseGrant) with etcd's "etcdserver: mvcc: database space
// exceeded" (ResourceExhausted); deletes, compaction, lease revokes and
// keep-alives, and Alarm itself still work, so that space can be freed
// and the alarm disarmed (etcdctl alarm disarm). The refusal is decided
// when a command is applied, as in etcd, so a write ordered after the
// disarm in the log is taken on every member. Puts to queues never
// enter the log: they are refused before Queues sees them while this
// member's applied state holds a NOSPACE alarm, so for them the alarm
// starts and ends as this member applies it, without waiting for raft.
//
// # Auth
//
// etcd's v3 auth (svc_auth.go, authz.go; the rules are kv/auth's):
// users, roles and the enabled flag are cluster state, changed by
// commands of the log and kept in snapshots; passwords are hashed with
// bcrypt (Config.BcryptCost) by the member that takes the request, so
// the log and snapshots hold hashes only. Authenticate checks the
// password on this member's state after a linearizable read index,
// rather than as a log entry as etcd does: the read index orders it
// after every change acknowledged before it. Its token is chute's
// simple token, an HMAC signed with a key that AuthEnable carries to
// every member, so a token from one member is valid on all of them
// until Config.AuthTokenTTL passes; deleting the user or changing its
// password ends it, and so does disabling auth (enabling draws a new
// key); grants and revokes take effect on the next call without ending
// tokens (etcd ends every token at any auth change and clients log in
// again; chute answers "invalid auth token" in the cases it ends one,
// which etcd clients also answer by logging in again).
//
// With Config.JWT (etcd's --auth-token jwt,...), Authenticate issues
// etcd's JWTs instead: claims username, revision (the auth revision) and
// exp, signed with the private key of the options' files; every member
// given the same key files verifies the tokens of every other, with no
// key in the log. A JWT ends at its exp (Config.JWT's ttl, not
// AuthTokenTTL) and, as a simple token, when its user is deleted or
// changes its password after its revision; since the keys do not change
// when auth is disabled and enabled again, an unexpired JWT outlives
// that.
//
// The caller of a call is the user of its token; a call without a token
// over a TLS connection whose client certificate the server verified
// (--client-cert-auth) runs as the certificate's CommonName, as etcd's
// AuthInfoFromTLS does (a CN that is no user is denied every check).
// With auth enabled, an interceptor (authorizer) checks every call
// before any handler, against this member's applied auth state (as etcd
// checks against its own), so a refused call reaches neither the store
// nor Queues: "user name is empty" without a token or certificate; KV calls need read
// or write on their keys (a txn: read on its compares' keys and what
// each op of both branches needs); LeaseRevoke, and each keep-alive,
// write on the lease's keys, LeaseLeases read on every leased key (both
// as etcd 3.4.42; root needs neither); other lease calls and watches a
// user, and each watch read on
// its range as it is created (refused as etcd does, created and
// canceled with "permission denied"); UserGet of oneself and RoleGet of
// a role one holds a user, as in etcd 3.5; Compact a user, as in etcd;
// everything else (Maintenance but Status and the alarms' list, auth
// and membership changes) the root role: raising or disarming an alarm
// too, which etcd 3.4 let anyone do. Authenticate, AuthStatus, Status,
// MemberList and Alarm's GET are open, as in etcd. Queue keys
// are keys: a producer needs write on its producer key, a consumer read
// on its consumer key and write on the delivery keys it acknowledges, a
// change of settings write on /config/queues/{name}. Creating a queue
// by a put (its record /q/{name} does not exist yet) also needs write
// on the record, through QueueRecords, which the Queues implements,
// since kv does not parse queue keys. The span of a traced call carries
// the user's name as etcd.user; passwords and tokens are never logged,
// traced or quoted in errors.
//
// As in etcd, a check is made again where an auth change could overtake
// it. A write carries the user and the auth revision of its check in its
// command's header, and its apply refuses it with "etcdserver: revision
// of auth store is old" when an auth change was applied since (clientv3
// logs in again and retries, and the retry is checked afresh); a lease
// revoke, or a put with a lease, is checked again at apply for write on
// the lease's keys, which another client may have attached meanwhile. A
// read, or a read-only txn, is refused the same way after it is read if
// this member's auth revision moved during it. A member behind on its
// log thus cannot let through what the log has already revoked.
//
// # Availability
//
// The key space is consistent first (CP): without a leader (a member cut
// off from the majority, an election) writes and linearizable reads fail
// with etcd's "etcdserver: no leader" or "request timed out" errors, and
// serializable reads answer from this member's last state. The queue
// namespace is available first (AP): puts to queues never wait for raft
// (dispatch holds them as copies while their dispatcher is unreachable),
// only the dispatcher records and queue settings are written through it.
// A client that asks for a leader (etcd's "hasleader" metadata:
// clientv3.WithRequireLeader, and every clientv3 lease keep-alive) gets
// "etcdserver: no leader" from a member without one, for its calls and,
// after LeaderCheckInterval three times over, for its running watch and
// keep-alive streams, as from etcd (requireleader.go); queue puts too,
// since it asked.
//
// # Where chute differs from etcd
//
//   - Keys are limited to MaxKeyBytes (1 KiB by default): a longer key is
//     InvalidArgument "etcdserver: key is too large". etcd has no such limit.
//   - Status's version is APIVersion, the etcd API level chute answers
//     as; chute's own version is in /status.
//   - Hash and HashKV hash keys and values only (CRC-32C in key order), not
//     revisions.
//   - Snapshot is a bbolt file in etcd's backend layout (key and meta
//     buckets) followed by its SHA-256, so etcdctl can save and inspect it;
//     it carries no raft membership and no alarms.
//   - Only NOSPACE can be activated: chute has no corruption check to act
//     on CORRUPT, so activating it is InvalidArgument.
//   - A NOSPACE alarm refuses a txn whose put is nested in an inner txn
//     too; etcd counts the puts of the outer txn's branches only.
//   - Membership comes from gossip: MemberAdd, MemberUpdate and
//     MemberPromote are refused with a message explaining --join.
//   - Simple auth tokens are chute's own, HMAC-signed (see Auth above):
//     grants and revokes do not end them, where etcd ends every token at
//     any auth change.
//   - A txn's compares and ops, its nested txns' included, are bounded
//     together at 8 times MaxTxnOps (etcdserver: too many operations in
//     txn request); etcd bounds each level alone, which let one request
//     within the size limit nest about 190,000 ops.
//   - Inside a txn, a put asking for its previous value needs read on its
//     key, and a put with a lease write on the lease's keys, as a put
//     alone does in etcd; etcd 3.4 checks neither inside a txn (a
//     write-only user read values through them).
//   - gRPC's health service answers NOT_SERVING until the node is ready;
//     etcd serves no call at all until then.
package kv
