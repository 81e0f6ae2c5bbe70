package kv

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv/auth"
	"chute/kv/mvcc"
)

// Errors of the requests and the server. Handlers map them, and the
// store's (mvcc's), to etcd's gRPC errors in one place, toGRPC, so clients
// decode them by their text as they would etcd's.
var (
	ErrEmptyKey        = errors.New("kv: key is not provided")
	ErrKeyTooLarge     = errors.New("kv: key is too large")
	ErrValueProvided   = errors.New("kv: value is provided")
	ErrLeaseProvided   = errors.New("kv: lease is provided")
	ErrTooManyOps      = errors.New("kv: too many operations in txn request")
	ErrDuplicateKey    = errors.New("kv: duplicate key given in txn request")
	ErrRequestTooLarge = errors.New("kv: request is too large")
	ErrStopped         = errors.New("kv: server stopped")
	ErrInvalidSort     = errors.New("kv: invalid sort option")
)

// ErrLeaseNotFound is the store's: a Consensus returns it from RenewLease
// when the lease is gone.
var ErrLeaseNotFound = mvcc.ErrLeaseNotFound

// ErrNoSpace is the store's: a write of this node's own (Put,
// CompareAndPut) that would grow the data fails with it while a NOSPACE
// alarm is raised.
var ErrNoSpace = mvcc.ErrNoSpace

// ErrAlarmUnsupported refuses an Alarm request whose action or alarm
// chute does not serve: only NOSPACE is raised (see the package doc).
var ErrAlarmUnsupported = errors.New("kv: alarm not supported")

// errGRPCAlarmUnsupported has no etcd equivalent: etcd takes every alarm
// type it knows.
var errGRPCAlarmUnsupported = status.Error(codes.InvalidArgument, "etcdserver: alarm not supported: chute raises and disarms only NOSPACE")

// ErrHashPassword refuses a password bcrypt cannot hash (longer than
// 72 bytes). The error never quotes the password.
var ErrHashPassword = errors.New("kv: password cannot be hashed")

// errGRPCHashPassword has no etcd equivalent: etcd's bcrypt took longer
// passwords and ignored the bytes after the 72nd.
var errGRPCHashPassword = status.Error(codes.InvalidArgument, "etcdserver: password cannot be hashed: bcrypt takes at most 72 bytes")

// authErrors maps kv/auth's errors to etcd's.
var authErrors = []struct{ err, grpc error }{
	{auth.ErrRootUserNotExist, rpctypes.ErrGRPCRootUserNotExist},
	{auth.ErrRootRoleNotExist, rpctypes.ErrGRPCRootRoleNotExist},
	{auth.ErrUserAlreadyExist, rpctypes.ErrGRPCUserAlreadyExist},
	{auth.ErrUserEmpty, rpctypes.ErrGRPCUserEmpty},
	{auth.ErrUserNotFound, rpctypes.ErrGRPCUserNotFound},
	{auth.ErrRoleAlreadyExist, rpctypes.ErrGRPCRoleAlreadyExist},
	{auth.ErrRoleNotFound, rpctypes.ErrGRPCRoleNotFound},
	{auth.ErrRoleEmpty, rpctypes.ErrGRPCRoleEmpty},
	{auth.ErrPermissionNotGiven, rpctypes.ErrGRPCPermissionNotGiven},
	{auth.ErrRoleNotGranted, rpctypes.ErrGRPCRoleNotGranted},
	{auth.ErrPermissionNotGranted, rpctypes.ErrGRPCPermissionNotGranted},
	{auth.ErrInvalidAuthMgmt, rpctypes.ErrGRPCInvalidAuthMgmt},
	{auth.ErrAuthFailed, rpctypes.ErrGRPCAuthFailed},
	{auth.ErrAuthNotEnabled, rpctypes.ErrGRPCAuthNotEnabled},
	{auth.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied},
	{auth.ErrInvalidToken, rpctypes.ErrGRPCInvalidAuthToken},
	{auth.ErrAuthOldRevision, rpctypes.ErrGRPCAuthOldRevision},
	{auth.ErrVerifyOnly, errGRPCVerifyOnly},
	{ErrHashPassword, errGRPCHashPassword},
}

// errGRPCVerifyOnly answers Authenticate on a member whose JWT options
// name no private key; etcd returns its bare error, with no gRPC code.
var errGRPCVerifyOnly = status.Error(codes.FailedPrecondition, "etcdserver: jwt: token signing attempted with verify-only key")

// errGRPCKeyTooLarge has no etcd equivalent (etcd limits only the request
// size); it uses etcd's wording and InvalidArgument like the other key errors.
var errGRPCKeyTooLarge = status.Error(codes.InvalidArgument, "etcdserver: key is too large")

// toGRPC maps an error of this package or of the store to the gRPC error an
// etcd server would return. Errors that already carry a gRPC status pass through.
func toGRPC(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, mvcc.ErrCompacted):
		return rpctypes.ErrGRPCCompacted
	case errors.Is(err, mvcc.ErrFutureRev):
		return rpctypes.ErrGRPCFutureRev
	case errors.Is(err, ErrEmptyKey):
		return rpctypes.ErrGRPCEmptyKey
	case errors.Is(err, ErrKeyTooLarge):
		return errGRPCKeyTooLarge
	case errors.Is(err, mvcc.ErrKeyNotFound):
		return rpctypes.ErrGRPCKeyNotFound
	case errors.Is(err, ErrValueProvided):
		return rpctypes.ErrGRPCValueProvided
	case errors.Is(err, ErrLeaseProvided):
		return rpctypes.ErrGRPCLeaseProvided
	case errors.Is(err, ErrTooManyOps):
		return rpctypes.ErrGRPCTooManyOps
	case errors.Is(err, ErrDuplicateKey):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, mvcc.ErrLeaseNotFound):
		return rpctypes.ErrGRPCLeaseNotFound
	case errors.Is(err, mvcc.ErrLeaseExists):
		return rpctypes.ErrGRPCLeaseExist
	case errors.Is(err, mvcc.ErrLeaseTTLTooBig):
		return rpctypes.ErrGRPCLeaseTTLTooLarge
	case errors.Is(err, ErrRequestTooLarge):
		return rpctypes.ErrGRPCRequestTooLarge
	case errors.Is(err, ErrStopped):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, ErrInvalidSort):
		return rpctypes.ErrGRPCInvalidSortOption
	case errors.Is(err, mvcc.ErrNoSpace):
		return rpctypes.ErrGRPCNoSpace
	case errors.Is(err, ErrAlarmUnsupported):
		return errGRPCAlarmUnsupported
	case errors.Is(err, ErrNoLeader):
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, ErrTimeout):
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, ErrNotLeader):
		return rpctypes.ErrGRPCNotLeader
	case errors.Is(err, ErrLeaderChanged):
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(err, ErrBadTransferee):
		return rpctypes.ErrGRPCBadLeaderTransferee
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCDeadlineExceeded
	}
	for _, m := range authErrors {
		if errors.Is(err, m.err) {
			return m.grpc
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}
