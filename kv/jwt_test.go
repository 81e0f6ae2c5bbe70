package kv

import (
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"chute/kv/auth"
)

// TestAuthService_Authenticate_jwt checks that with Config.JWT set,
// Authenticate issues a JWT that the authorizer accepts, that a JWT of
// another secret is an invalid token, and that changing the password
// ends the token.
func TestAuthService_Authenticate_jwt(t *testing.T) {
	mine, err := auth.NewJWT("HS256", nil, []byte("member secret"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewJWT("HS256", nil, []byte("another secret"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv, cli := startServer(t, func(c *Config) {
		authConfig(c)
		c.JWT = mine
	})
	enableAuth(t, cli)
	ctx := testCtx(t, 20*time.Second)
	conn, err := grpc.NewClient(srv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	resp, err := pb.NewAuthClient(conn).Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: "rootpw"})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(resp.Token, "."); n != 2 {
		t.Fatalf("token %q: got %d dots, want a JWT's 2", resp.Token, n)
	}
	kvc := pb.NewKVClient(conn)
	if _, err := kvc.Put(metadataCtx(ctx, "token", resp.Token), &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}); err != nil {
		t.Fatalf("put with the JWT: %v", err)
	}

	tok, err := srv.sm.Auth().TokenJWT(other, "root", srv.sm.Auth().Revision(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = kvc.Range(metadataCtx(ctx, "token", tok), &pb.RangeRequest{Key: []byte("a")})
	wantErr(t, "get with a JWT of another secret", rpctypes.Error(err), rpctypes.ErrInvalidAuthToken)

	root := rootClient(t, srv)
	if _, err := root.UserChangePassword(ctx, "root", "newpw"); err != nil {
		t.Fatal(err)
	}
	_, err = kvc.Range(metadataCtx(ctx, "token", resp.Token), &pb.RangeRequest{Key: []byte("a")})
	wantErr(t, "get with the JWT after the password changed", rpctypes.Error(err), rpctypes.ErrInvalidAuthToken)
}
