//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"chute/internal/testutil"
	"chute/kv/v3lockpb"
)

// certUserCheck runs the checks of TestAuth_certCN_user against a server
// with auth off that serves plain (http://) and secure (https://, client
// certificates of srv's CA required) client URLs.
func certUserCheck(t *testing.T, srv certSet, plain, secure string) {
	t.Helper()
	etcdctl := lookTool(t, "etcdctl")
	for _, args := range appAuthSetup() {
		if res, err := runEtcdctl(etcdctl, plain, "", args...); err != nil || res.Code != 0 {
			t.Fatalf("etcdctl %q on %s: %v, %+v", args, plain, err, res)
		}
	}
	appCert, appKey := srv.issue(t, "app")
	strangerCert, strangerKey := srv.issue(t, "stranger")

	app := tlsClient(t, srv.caFile, appCert, appKey, secure)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := app.Put(ctx, "app/a", "1"); err != nil {
		t.Errorf("certificate CN=app: put app/a: %v", err)
	}
	if resp, err := app.Get(ctx, "app/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("certificate CN=app: get app/ --prefix: got %v, %v; want app/a", resp, err)
	}
	_, err := app.Put(ctx, "other", "1")
	requireDenied(t, "certificate CN=app: put other", err)
	_, err = app.Get(ctx, "/config/", clientv3.WithPrefix())
	requireDenied(t, "certificate CN=app: get /config/ --prefix", err)
	// etcd's Lock service: its steps are checked as the certificate's user.
	if g, err := app.Grant(ctx, 60); err != nil {
		t.Errorf("certificate CN=app: lease grant: %v", err)
	} else {
		lc := v3lockpb.NewLockClient(app.ActiveConnection())
		if l, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("app/lk"), Lease: int64(g.ID)}); err != nil || !strings.HasPrefix(string(l.GetKey()), "app/lk/") {
			t.Errorf("certificate CN=app: Lock app/lk: %v, %v; want a key under app/lk/", l, err)
		}
		if _, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("other"), Lease: int64(g.ID)}); status.Convert(err).Message() != rpctypes.ErrPermissionDenied.Error() {
			t.Errorf("certificate CN=app: Lock other: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
	}

	stranger := tlsClient(t, srv.caFile, strangerCert, strangerKey, secure)
	_, err = stranger.Put(ctx, "app/b", "1")
	requireDenied(t, "certificate CN=stranger, no such user: put app/b", err)

	res, err := runEtcdctl(etcdctl, secure, "", "--cacert", srv.caFile, "--cert", appCert, "--key", appKey, "get", "app/a", "--print-value-only")
	if err != nil || res.Code != 0 || res.Stdout != "1\n" {
		t.Errorf("etcdctl with the CN=app certificate: get app/a: got %+v, %v; want 1", res, err)
	}
	if _, err := clusterClient(t, plain).Get(ctx, "app/a"); err == nil || err.Error() != "etcdserver: user name is empty" {
		t.Errorf("plain URL, no certificate, no user: get app/a: got %v, want user name is empty", err)
	}
}

// TestAuth_certCN_user runs a node whose https:// client URL requires
// certificates of a CA (--client-cert-auth), beside a plain URL, with
// auth enabled: a client certificate's CommonName is its user, without a
// password, as with etcd. CN=app reads and writes app/ (and locks a name
// under it with etcd's Lock service) and hears permission denied
// elsewhere; CN=stranger, no user, hears permission
// denied; the plain URL without a user answers user name is empty.
func TestAuth_certCN_user(t *testing.T) {
	t.Parallel()
	srv := newCertSet(t, "client CA", "server")
	secure, plain := testutil.FreeAddr(t), testutil.FreeAddr(t)
	StartChute(t,
		"--listen-client-urls", "https://"+secure+",http://"+plain,
		"--cert-file", srv.cert, "--key-file", srv.key,
		"--client-cert-auth", "--trusted-ca-file", srv.caFile)
	certUserCheck(t, srv, "http://"+plain, "https://"+secure)
}

// TestAuth_certCN_onlyWithClientCertAuth: with --trusted-ca-file but
// without --client-cert-auth, a verified client certificate names no
// user, as in etcd, which reads the CN only with --client-cert-auth: a
// call with the CN=app certificate and no password answers user name is
// empty. The CN used to log it in, a certificate that no CRL could
// revoke (--client-crl-file needs --client-cert-auth).
func TestAuth_certCN_onlyWithClientCertAuth(t *testing.T) {
	t.Parallel()
	srv := newCertSet(t, "client CA", "server")
	secure, plain := testutil.FreeAddr(t), testutil.FreeAddr(t)
	StartChute(t,
		"--listen-client-urls", "https://"+secure+",http://"+plain,
		"--cert-file", srv.cert, "--key-file", srv.key, "--trusted-ca-file", srv.caFile)
	etcdctl := lookTool(t, "etcdctl")
	for _, args := range appAuthSetup() {
		if res, err := runEtcdctl(etcdctl, "http://"+plain, "", args...); err != nil || res.Code != 0 {
			t.Fatalf("etcdctl %q: %v, %+v", args, err, res)
		}
	}
	appCert, appKey := srv.issue(t, "app")
	app := tlsClient(t, srv.caFile, appCert, appKey, "https://"+secure)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := app.Put(ctx, "app/a", "1"); err == nil || err.Error() != "etcdserver: user name is empty" {
		t.Fatalf("certificate CN=app without --client-cert-auth: put app/a: got %v, want user name is empty", err)
	}
}
