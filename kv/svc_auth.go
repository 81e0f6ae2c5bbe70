package kv

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/auth"
	"chute/kv/mvcc"
)

// authService is etcd's Auth service. Changes are commands of the log
// (applied to the state machine's auth.Store by every member); reads and
// Authenticate are served from this member's state at a linearizable
// point, so they see every change acknowledged before them. Passwords
// are hashed here, before proposing: the log holds hashes only.
// Who may call what is decided by the authorizer (authz.go).
type authService struct {
	pb.UnimplementedAuthServer
	srv   *Server
	store *mvcc.Store
	auth  *auth.Store
	cost  int           // bcrypt cost
	ttl   time.Duration // token lifetime
	jwt   *auth.JWT     // nil: simple tokens
	now   func() time.Time
}

var _ pb.AuthServer = (*authService)(nil)

// apply proposes an auth command and returns its response and header.
func (a *authService) apply(ctx context.Context, req *pb.InternalRaftRequest) (any, *pb.ResponseHeader, error) {
	res := a.srv.write(ctx, req)
	if res.Err != nil {
		return nil, nil, toGRPC(res.Err)
	}
	return res.Resp, a.store.Header(res.Rev), nil
}

// read returns once this member's auth state holds every change
// acknowledged before the call, with the header to answer with.
func (a *authService) read(ctx context.Context) (*pb.ResponseHeader, error) {
	if err := a.srv.linearize(ctx); err != nil {
		return nil, toGRPC(err)
	}
	return a.store.Header(a.store.Rev()), nil
}

// AuthEnable draws the key that signs tokens and puts it in the command,
// so that every member signs and verifies with the same key.
func (a *authService) AuthEnable(ctx context.Context, _ *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{
		AuthEnable:   &pb.AuthEnableRequest{},
		Authenticate: &pb.InternalAuthenticateRequest{SimpleToken: auth.NewTokenKey()},
	})
	if err != nil {
		return nil, err
	}
	r := resp.(*pb.AuthEnableResponse)
	r.Header = h
	return r, nil
}

func (a *authService) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthDisable: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthDisableResponse)
	out.Header = h
	return out, nil
}

func (a *authService) AuthStatus(ctx context.Context, _ *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.AuthStatusResponse{Header: h, Enabled: a.auth.Enabled(), AuthRevision: a.auth.Revision()}, nil
}

// Authenticate checks the password on this member's state at a
// linearizable point instead of ordering a log entry after the user's
// changes, as etcd does: the read index orders it after every change
// acknowledged before it, and the token it signs is valid on every
// member.
func (a *authService) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	rev, err := a.auth.Authenticate(r.Name, r.Password)
	if err != nil {
		return nil, toGRPC(err)
	}
	var tok string
	if a.jwt != nil {
		tok, err = a.auth.TokenJWT(a.jwt, r.Name, rev, a.now())
	} else {
		tok, err = a.auth.Token(r.Name, rev, a.now(), a.ttl)
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.AuthenticateResponse{Header: h, Token: tok}, nil
}

// hash returns the bcrypt hash of password for a command; the error
// never quotes the password.
func (a *authService) hash(password string) (string, error) {
	h, err := auth.HashPassword(password, a.cost)
	if err != nil {
		return "", toGRPC(ErrHashPassword)
	}
	return h, nil
}

func (a *authService) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	if r.Name == "" {
		return nil, toGRPC(auth.ErrUserEmpty)
	}
	cmd := &pb.AuthUserAddRequest{Name: r.Name, Options: r.Options, HashedPassword: r.HashedPassword}
	if (r.Options == nil || !r.Options.NoPassword) && r.Password != "" {
		h, err := a.hash(r.Password)
		if err != nil {
			return nil, err
		}
		cmd.HashedPassword = h
	}
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthUserAdd: cmd})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthUserAddResponse)
	out.Header = h
	return out, nil
}

func (a *authService) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	roles, err := a.auth.User(r.Name)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.AuthUserGetResponse{Header: h, Roles: roles}, nil
}

func (a *authService) UserList(ctx context.Context, _ *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.AuthUserListResponse{Header: h, Users: a.auth.Users()}, nil
}

func (a *authService) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthUserDelete: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthUserDeleteResponse)
	out.Header = h
	return out, nil
}

func (a *authService) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	cmd := &pb.AuthUserChangePasswordRequest{Name: r.Name, HashedPassword: r.HashedPassword}
	if r.Password != "" {
		h, err := a.hash(r.Password)
		if err != nil {
			return nil, err
		}
		cmd.HashedPassword = h
	}
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthUserChangePassword: cmd})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthUserChangePasswordResponse)
	out.Header = h
	return out, nil
}

func (a *authService) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthUserGrantRole: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthUserGrantRoleResponse)
	out.Header = h
	return out, nil
}

func (a *authService) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthUserRevokeRole: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthUserRevokeRoleResponse)
	out.Header = h
	return out, nil
}

func (a *authService) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthRoleAdd: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthRoleAddResponse)
	out.Header = h
	return out, nil
}

func (a *authService) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	perms, err := a.auth.Role(r.Role)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.AuthRoleGetResponse{Header: h, Perm: perms}, nil
}

func (a *authService) RoleList(ctx context.Context, _ *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	h, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.AuthRoleListResponse{Header: h, Roles: a.auth.Roles()}, nil
}

func (a *authService) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthRoleDelete: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthRoleDeleteResponse)
	out.Header = h
	return out, nil
}

func (a *authService) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthRoleGrantPermission: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthRoleGrantPermissionResponse)
	out.Header = h
	return out, nil
}

func (a *authService) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	resp, h, err := a.apply(ctx, &pb.InternalRaftRequest{AuthRoleRevokePermission: r})
	if err != nil {
		return nil, err
	}
	out := resp.(*pb.AuthRoleRevokePermissionResponse)
	out.Header = h
	return out, nil
}
