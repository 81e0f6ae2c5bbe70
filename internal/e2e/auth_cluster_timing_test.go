//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// authSwitchBound is how soon auth enable or disable on one node holds on
// every node.
const authSwitchBound = time.Second

// kvClient returns a raw KV client of p, without clientv3's logins, so a
// test chooses the token each call carries.
func kvClient(t testing.TB, p *Proc) pb.KVClient {
	t.Helper()
	return pb.NewKVClient(mustConn(t, p))
}

// rangeWith gets key from kv with token ("": none) in the call's metadata,
// as clientv3 sends it, and returns the gRPC error.
func rangeWith(kv pb.KVClient, token, key string) error {
	ctx, cancel := rpcCtx()
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, token)
	}
	_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte(key)})
	return err
}

// sameStatus reports whether err is the gRPC error want: code and message.
func sameStatus(err, want error) bool {
	return status.Code(err) == status.Code(want) && status.Convert(err).Message() == status.Convert(want).Message()
}

// requireStatus fails the test unless err is the gRPC error want.
func requireStatus(t testing.TB, what string, err, want error) {
	t.Helper()
	if !sameStatus(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// waitEveryNode polls check on each node until it holds on all, and fails
// the test unless it does within bound.
func waitEveryNode(t testing.TB, bound time.Duration, what string, nodes []*Proc, check func(p *Proc) error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for _, p := range nodes {
		for {
			err := check(p)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s on %s within %v: %v", what, p.Name, bound, err)
			}
			time.Sleep(pollInterval)
		}
	}
}

// TestAuth_cluster_tokenOnEveryNode runs three nodes with users made on a:
// clientv3 logs in on each with a user and password; a token a issued
// reads and writes on b and c as its user, within the user's
// permissions; a bogus token is refused on every node. auth disable on b
// opens every node within a second, auth enable on c closes them all
// within a second.
func TestAuth_cluster_tokenOnEveryNode(t *testing.T) {
	t.Parallel()
	cl := newCluster(t)
	a, b, c := cl.startThree()
	authTokenEverywhere(t, []*Proc{a, b, c})
}

// authTokenEverywhere is TestAuth_cluster_tokenOnEveryNode on nodes, at
// least one: the first issues the token, the second disables auth, the
// last enables it again.
func authTokenEverywhere(t *testing.T, nodes []*Proc) {
	a, b, c := nodes[0], nodes[min(1, len(nodes)-1)], nodes[len(nodes)-1]
	kvs := make(map[*Proc]pb.KVClient)
	for _, p := range nodes {
		kvs[p] = kvClient(t, p)
	}
	for _, args := range appAuthSetup() {
		ctlOK(t, a, "", args...)
	}

	for _, p := range nodes {
		cli := authClient(t, p, "app", authProdPass)
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, "app/"+p.Name, p.Name)
		cancel()
		if err != nil {
			t.Errorf("clientv3 as app on %s: put app/%s: %v", p.Name, p.Name, err)
		}
	}

	ctx, cancel := rpcCtx()
	auth, err := pb.NewAuthClient(mustConn(t, a)).Authenticate(ctx, &pb.AuthenticateRequest{Name: "app", Password: authProdPass})
	cancel()
	if err != nil {
		t.Fatalf("authenticate app on a: %v", err)
	}
	for _, p := range nodes {
		kv := kvs[p]
		if err := rangeWith(kv, auth.Token, "app/a"); err != nil {
			t.Errorf("%s: get app/a with a's token: %v", p.Name, err)
		}
		requireStatus(t, p.Name+": get other with a's token", rangeWith(kv, auth.Token, "other"), rpctypes.ErrGRPCPermissionDenied)
		requireStatus(t, p.Name+": get app/a with a bogus token", rangeWith(kv, "bogus.1", "app/a"), rpctypes.ErrGRPCInvalidAuthToken)
		requireStatus(t, p.Name+": get app/a without a token", rangeWith(kv, "", "app/a"), rpctypes.ErrGRPCUserEmpty)
	}

	ctlOK(t, b, "", "--user", authRoot, "auth", "disable")
	waitEveryNode(t, authSwitchBound, "a get without a token to succeed after auth disable", nodes, func(p *Proc) error {
		return rangeWith(kvs[p], "", "other")
	})
	ctlOK(t, c, "", "--user", authRoot, "auth", "enable")
	waitEveryNode(t, authSwitchBound, "a get without a token to answer user name is empty after auth enable", nodes, func(p *Proc) error {
		if err := rangeWith(kvs[p], "", "other"); !sameStatus(err, rpctypes.ErrGRPCUserEmpty) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
}

// mustConn returns a plain gRPC connection to p's client port, closed when
// the test ends.
func mustConn(t testing.TB, p *Proc) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", p, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
