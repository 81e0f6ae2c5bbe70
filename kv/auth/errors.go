package auth

import "errors"

// Errors of auth commands and checks; kv maps each to etcd's gRPC error of
// the same meaning.
var (
	ErrRootUserNotExist     = errors.New("auth: root user does not exist")
	ErrRootRoleNotExist     = errors.New("auth: root user does not have root role")
	ErrUserAlreadyExist     = errors.New("auth: user name already exists")
	ErrUserEmpty            = errors.New("auth: user name is empty")
	ErrUserNotFound         = errors.New("auth: user name not found")
	ErrRoleAlreadyExist     = errors.New("auth: role name already exists")
	ErrRoleNotFound         = errors.New("auth: role name not found")
	ErrRoleEmpty            = errors.New("auth: role name is empty")
	ErrPermissionNotGiven   = errors.New("auth: permission not given")
	ErrRoleNotGranted       = errors.New("auth: role is not granted to the user")
	ErrPermissionNotGranted = errors.New("auth: permission is not granted to the role")
	ErrInvalidAuthMgmt      = errors.New("auth: invalid auth management")
	ErrAuthFailed           = errors.New("auth: authentication failed, invalid user ID or password")
	ErrAuthNotEnabled       = errors.New("auth: authentication is not enabled")
	ErrPermissionDenied     = errors.New("auth: permission denied")
	ErrInvalidToken         = errors.New("auth: invalid auth token")
	ErrAuthOldRevision      = errors.New("auth: revision in header is old")
	ErrCorrupt              = errors.New("auth: state is corrupt")
)
