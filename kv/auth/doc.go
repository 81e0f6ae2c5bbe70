// Package auth is the pure logic of etcd's v3 auth for chute: users with
// bcrypt password hashes, roles with key-range permissions, the enabled
// flag, the auth revision and the key that signs tokens. It knows nothing
// of gRPC or raft: kv/mvcc applies the auth commands of the log to a
// Store, in order, on every member, and keeps it in its snapshots; kv
// serves the Auth service and checks every call against it.
//
// # Semantics
//
// etcd's, error for error: the root user must exist and hold the root
// role before auth can be enabled (nothing is granted implicitly); while
// auth is enabled root cannot be deleted nor lose the root role, and the
// root role cannot be deleted (ErrInvalidAuthMgmt). The root role allows
// every key and every admin call. Every change that succeeds raises the
// auth revision by one.
//
// A permission covers one key (empty range end), the keys in [key, range
// end), or every key from key on (range end "\x00"). A request for one
// key is allowed when some permission of the right type (READ or WRITE,
// READWRITE counting as both) of one of the user's roles covers it; a
// request for a range when the user's permissions of that type, merged
// into disjoint ranges as etcd's range permission cache does, hold the
// whole requested range in one of them.
//
// # Passwords and tokens
//
// The log carries bcrypt hashes, never passwords: the member that takes
// a UserAdd or UserChangePassword hashes the password before proposing.
// Tokens are chute's own simple tokens, valid on every member without a
// log entry per login: "<user>.<auth revision>.<expiry>.<mac>" with the
// user base64url-encoded and the mac an HMAC-SHA256 over the rest, keyed
// by a random 32-byte key that the member proposing AuthEnable draws and
// puts in the command, so every member holds the same key after apply.
// Each AuthEnable draws a new key: tokens issued before auth was last
// disabled are invalid. A token is valid until its expiry (the issuing
// member's clock plus --auth-token-ttl) unless its user was deleted or
// its password changed at an auth revision above the token's; other auth
// changes (grants, revokes, roles) leave tokens valid and take effect at
// once, because permissions are looked up on every call. An invalid
// token is ErrInvalidToken, which etcd clients answer by authenticating
// again.
//
// JWT (jwt.go) is etcd's other token: claims username, revision and exp,
// signed and verified with keys the operator gives every member
// (ParseJWTOptions reads etcd's --auth-token options; the caller reads
// the files). TokenJWT and VerifyJWT apply the same user and password
// rules as Token and Verify.
//
// # Locks
//
// Store.mu guards all of the Store's fields. Password hashes are compared
// outside it: bcrypt takes tens of milliseconds.
package auth
