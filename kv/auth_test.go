package kv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// authConfig makes passwords cheap to hash.
func authConfig(c *Config) { c.BcryptCost = bcrypt.MinCost }

// enableAuth adds root with password rootpw and the root role, and
// enables auth, as etcdctl's user add, user grant-role and auth enable.
func enableAuth(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.UserAdd(ctx, "root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

// rootClient returns a client of srv logged in as root, whose password
// enableAuth set.
func rootClient(t *testing.T, srv *Server) *clientv3.Client {
	t.Helper()
	root, err := userClient(t, srv, "root", "rootpw")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// userClient returns a client of srv that logs in as user.
func userClient(t *testing.T, srv *Server, user, password string) (*clientv3.Client, error) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.ClientAddrs()[0].String()},
		DialTimeout: 5 * time.Second,
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, nil
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestAuthService_users_etcdErrors checks user and role management and
// enabling against etcd's errors.
func TestAuthService_users_etcdErrors(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	ctx := testCtx(t, 20*time.Second)
	_, err := cli.AuthEnable(ctx)
	wantErr(t, "enable without root", err, rpctypes.ErrRootUserNotExist)
	if _, err := cli.UserAdd(ctx, "root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	_, err = cli.AuthEnable(ctx)
	wantErr(t, "enable with a root user without the root role", err, rpctypes.ErrRootRoleNotExist)
	_, err = cli.UserAdd(ctx, "root", "x")
	wantErr(t, "adding root again", err, rpctypes.ErrUserAlreadyExist)
	_, err = cli.UserAdd(ctx, "", "x")
	wantErr(t, "adding a user without name", err, rpctypes.ErrUserEmpty)
	long := strings.Repeat("secret", 13) // 78 bytes: more than bcrypt takes
	if _, err = cli.UserAdd(ctx, "long", long); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("adding a user with a 78-byte password: got %v, want an error that does not quote it", err)
	}
	_, err = cli.UserGet(ctx, "nobody")
	wantErr(t, "getting a missing user", err, rpctypes.ErrUserNotFound)
	_, err = cli.UserGrantRole(ctx, "root", "nope")
	wantErr(t, "granting a missing role", err, rpctypes.ErrRoleNotFound)
	if _, err := cli.RoleAdd(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	_, err = cli.RoleAdd(ctx, "r")
	wantErr(t, "adding a role again", err, rpctypes.ErrRoleAlreadyExist)
	_, err = cli.RoleRevokePermission(ctx, "r", "k", "")
	wantErr(t, "revoking a permission not granted", err, rpctypes.ErrPermissionNotGranted)
	_, err = cli.Authenticate(ctx, "root", "rootpw")
	wantErr(t, "authenticating while disabled", err, rpctypes.ErrAuthNotEnabled)
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RoleGrantPermission(ctx, "r", "/a/", "/a0", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	root := rootClient(t, srv)
	_, err = root.UserDelete(ctx, "root")
	wantErr(t, "deleting root while enabled", err, rpctypes.ErrInvalidAuthMgmt)
	_, err = root.UserRevokeRole(ctx, "root", "root")
	wantErr(t, "revoking root's root role while enabled", err, rpctypes.ErrInvalidAuthMgmt)
	users, err := root.UserList(ctx)
	if err != nil || strings.Join(users.Users, ",") != "root" {
		t.Fatalf("user list: got %v %v, want root", users, err)
	}
	role, err := root.RoleGet(ctx, "r")
	if err != nil || len(role.Perm) != 1 || string(role.Perm[0].Key) != "/a/" || string(role.Perm[0].RangeEnd) != "/a0" {
		t.Fatalf("role get: got %v %v, want readwrite [/a/, /a0)", role, err)
	}
	st, err := root.AuthStatus(ctx)
	if err != nil || !st.Enabled || st.AuthRevision == 0 {
		t.Fatalf("auth status: got %v %v, want enabled at a revision above 0", st, err)
	}
}

// TestAuthorizer_tokens checks logging in: a wrong password fails with
// etcd's error, a call without a token answers "user name is empty",
// one with a forged token "invalid auth token", and the calls etcd
// leaves open work without a user.
func TestAuthorizer_tokens(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	enableAuth(t, cli)
	ctx := testCtx(t, 20*time.Second)
	_, err := userClient(t, srv, "root", "wrong")
	wantErr(t, "logging in with a wrong password", err, rpctypes.ErrAuthFailed)
	_, err = cli.Get(ctx, "a")
	wantErr(t, "get without a token", err, rpctypes.ErrUserEmpty)
	_, err = cli.Put(ctx, "a", "1")
	wantErr(t, "put without a token", err, rpctypes.ErrUserEmpty)
	if _, err := cli.Status(ctx, cli.Endpoints()[0]); err != nil {
		t.Fatalf("status without a token: got %v, want nil", err)
	}
	if _, err := cli.AuthStatus(ctx); err != nil {
		t.Fatalf("auth status without a token: got %v, want nil", err)
	}
	if _, err := cli.AlarmList(ctx); err != nil {
		t.Fatalf("alarm list without a token: got %v, want nil (etcdctl endpoint health reads it)", err)
	}
	_, err = cli.AlarmDisarm(ctx, &clientv3.AlarmMember{Alarm: pb.AlarmType_NOSPACE})
	wantErr(t, "alarm disarm without a token", err, rpctypes.ErrUserEmpty)
	_, err = cli.Compact(ctx, 1)
	wantErr(t, "compact without a token", err, rpctypes.ErrUserEmpty)
	conn, err := grpc.NewClient(srv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	kvc := pb.NewKVClient(conn) // not clientv3's: it would log in again and retry
	forged := metadataCtx(ctx, "token", "cm9vdA.1.99999999999999.AAAA")
	_, err = kvc.Range(forged, &pb.RangeRequest{Key: []byte("a")})
	wantErr(t, "get with a forged token", rpctypes.Error(err), rpctypes.ErrInvalidAuthToken)
	_, err = pb.NewMaintenanceClient(conn).Alarm(forged, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	wantErr(t, "alarm list with a forged token (open without one)", rpctypes.Error(err), rpctypes.ErrInvalidAuthToken)

	root := rootClient(t, srv)
	if _, err := root.Put(ctx, "a", "1"); err != nil {
		t.Fatalf("put as root: %v", err)
	}
	if resp, err := root.Get(ctx, "a"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get as root: got %v %v, want a=1", resp, err)
	}
	if _, err := root.AuthDisable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "a"); err != nil {
		t.Fatalf("get without a token once disabled: got %v, want nil", err)
	}
}

// metadataCtx returns ctx with an outgoing metadata pair.
func metadataCtx(ctx context.Context, k, v string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, k, v)
}
