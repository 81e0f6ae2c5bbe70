package kvtest

import (
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"chute/kv"
)

// TestLog_authAcrossMembers checks auth as cluster state: users added
// through one member log in on another, a token issued by one member is
// accepted by the others, disabling and enabling through one member
// takes effect on all, and a member that joins later (from a snapshot)
// knows the users.
func TestLog_authAcrossMembers(t *testing.T) {
	log := New()
	srvs, clis := startLogMembers(t, log, 3)
	ctx := testCtx(t, 30*time.Second)
	if _, err := clis[0].UserAdd(ctx, "root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	if _, err := clis[1].UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := clis[2].AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		if _, err := cli.Get(ctx, "a"); !errors.Is(err, rpctypes.ErrUserEmpty) {
			t.Fatalf("get without a token through member %d: got %v, want %v", i, err, rpctypes.ErrUserEmpty)
		}
	}

	// A token from member 1, used on every member.
	tok, err := clis[1].Authenticate(ctx, "root", "rootpw")
	if err != nil {
		t.Fatal(err)
	}
	withToken := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok.Token)
	for i, cli := range clis {
		if _, err := cli.Put(withToken, "a", "1"); err != nil {
			t.Fatalf("put with member 1's token through member %d: got %v, want nil", i, err)
		}
	}

	// clientv3 with a user, on a member that joins from a snapshot.
	late, _ := startLogMember(t, log, 0x103)
	root := userClient(t, late, "root", "rootpw")
	if resp, err := root.Get(ctx, "a"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get as root on a member restored from a snapshot: got %v %v, want a=1", resp, err)
	}

	if _, err := root.AuthDisable(ctx); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		if _, err := cli.Get(ctx, "a"); err != nil {
			t.Fatalf("get without a token through member %d once disabled: got %v, want nil", i, err)
		}
	}
	if _, err := clis[0].AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		srv := srvs[i]
		if _, err := cli.Get(ctx, "a"); !errors.Is(err, rpctypes.ErrUserEmpty) {
			t.Fatalf("get without a token through member %d once enabled again: got %v, want %v", i, err, rpctypes.ErrUserEmpty)
		}
		// Enabling drew a new signing key: the old token is gone. (Plain
		// gRPC: clientv3 would retry, trying to log in again.)
		kvc := rawKV(t, srv)
		if _, err := kvc.Range(withToken, &pb.RangeRequest{Key: []byte("a")}); rpctypes.Error(err) != rpctypes.ErrInvalidAuthToken {
			t.Fatalf("get with a token from before disable through member %d: got %v, want %v", i, err, rpctypes.ErrInvalidAuthToken)
		}
	}
	// clientv3 logs in again by itself when its token is refused.
	if _, err := root.Get(ctx, "a"); err != nil {
		t.Fatalf("get as root after enable again: got %v, want nil", err)
	}
}

// userClient returns a clientv3 client of srv that logs in as user.
func userClient(t *testing.T, srv *kv.Server, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.ClientAddrs()[0].String()},
		DialTimeout: 5 * time.Second,
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// rawKV returns a KV client of srv without clientv3's retries.
func rawKV(t *testing.T, srv *kv.Server) pb.KVClient {
	t.Helper()
	conn, err := grpc.NewClient(srv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewKVClient(conn)
}
