//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"chute/internal/otlptest"
)

// Marker passwords of the secrets test: any of them in a node's output
// is a leak.
const (
	markRoot  = "MarkRootPw-q8Zt4"
	markUser  = "MarkUserPw-w3Vn7"
	markNew   = "MarkNewPw-k5Rb2"
	markWrong = "MarkWrongPw-j9Ls6"
	markUName = "leakcheck-user" // a user name: spans carry it, unlike its password
)

// exerciseAuth makes every call of the Auth service on p, with the marker
// passwords, and the calls that authenticate: clientv3 with a user and
// password, and etcdctl --user. It fails the test where an answer is not
// etcd's. It returns the tokens p issued. AuthStatus, which etcd 3.4
// lacks, is called on chute only.
func exerciseAuth(t testing.TB, p *Proc) []string {
	t.Helper()
	cli := clusterClient(t, p.ClientAddr)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", p, what, err)
		}
	}
	// One bound for the whole exercise: it runs etcdctl too.
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	_, err := cli.UserAdd(ctx, "root", markRoot)
	must("user add root", err)
	_, err = cli.RoleAdd(ctx, "root")
	must("role add root", err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	must("user grant-role root root", err)
	_, err = cli.UserAdd(ctx, markUName, markUser)
	must("user add", err)
	_, err = cli.RoleAdd(ctx, "producer")
	must("role add producer", err)
	_, err = cli.RoleGrantPermission(ctx, "producer", "/q/ch:events/p/", "/q/ch:events/p0", clientv3.PermissionType(authpb.WRITE))
	must("role grant-permission", err)
	_, err = cli.UserGrantRole(ctx, markUName, "producer")
	must("user grant-role", err)
	if p.Kind == "chute" {
		st, err := cli.AuthStatus(ctx)
		must("auth status", err)
		if st.Enabled {
			t.Errorf("%s: auth status before auth enable: got enabled, want disabled", p)
		}
	}
	_, err = cli.AuthEnable(ctx)
	must("auth enable", err)

	var tokens []string
	auth, err := cli.Authenticate(ctx, "root", markRoot)
	must("authenticate root", err)
	tokens = append(tokens, auth.Token)
	auth, err = cli.Authenticate(ctx, markUName, markUser)
	must("authenticate user", err)
	tokens = append(tokens, auth.Token)
	if _, err := cli.Authenticate(ctx, "root", markWrong); grpcCode(err) != codes.InvalidArgument ||
		err.Error() != rpctypes.ErrAuthFailed.Error() {
		t.Errorf("%s: authenticate root with a wrong password: got %v, want %v", p, err, rpctypes.ErrAuthFailed)
	}
	if _, err := cli.Get(ctx, "a"); err == nil || err.Error() != rpctypes.ErrUserEmpty.Error() {
		t.Errorf("%s: get without a user: got %v, want %v", p, err, rpctypes.ErrUserEmpty)
	}

	root := authClient(t, p, "root", markRoot)
	if p.Kind == "chute" {
		st, err := root.AuthStatus(ctx)
		must("auth status", err)
		if !st.Enabled {
			t.Errorf("%s: auth status after auth enable: got disabled, want enabled", p)
		}
	}
	_, err = root.Put(ctx, "/q/ch:events/p/0", `{"id":0}`)
	must("root: put /q/ch:events/p/0", err)
	user := authClient(t, p, markUName, markUser)
	_, err = user.Put(ctx, "/q/ch:events/p/1", `{"id":1}`)
	must("user: put /q/ch:events/p/1", err)
	if _, err := user.Put(ctx, "/q/ch:other/p/1", `{"id":1}`); grpcCode(err) != codes.PermissionDenied {
		t.Errorf("%s: user: put /q/ch:other/p/1: got %v, want permission denied", p, err)
	}
	_, err = root.UserGet(ctx, markUName)
	must("user get", err)
	_, err = root.UserList(ctx)
	must("user list", err)
	_, err = root.RoleGet(ctx, "producer")
	must("role get", err)
	_, err = root.RoleList(ctx)
	must("role list", err)
	_, err = root.UserChangePassword(ctx, markUName, markNew)
	must("user passwd", err)
	if _, err := clientv3.New(clientv3.Config{Endpoints: []string{p.ClientAddr}, DialTimeout: rpcTimeout,
		Username: markUName, Password: markUser, Logger: zap.NewNop()}); err == nil ||
		!strings.Contains(err.Error(), rpctypes.ErrAuthFailed.Error()) {
		t.Errorf("%s: clientv3 with the old password: got %v, want %v", p, err, rpctypes.ErrAuthFailed)
	}
	user = authClient(t, p, markUName, markNew)
	_, err = user.Put(ctx, "/q/ch:events/p/2", `{"id":2}`)
	must("user with the new password: put /q/ch:events/p/2", err)

	etcdctl := lookTool(t, "etcdctl")
	for _, c := range []struct {
		user string
		code int
	}{
		{"root:" + markRoot, 0},
		{markUName + ":" + markNew, 1}, // permission denied
		{markUName + ":" + markUser, 2},
		{"root:" + markWrong, 2},
	} {
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "--user", c.user, "get", "a")
		if err != nil || res.Code != c.code {
			t.Errorf("%s: etcdctl --user %s get a: got %+v, %v; want exit %d", p, c.user, res, err, c.code)
		}
	}
	res, err := runEtcdctl(etcdctl, p.ClientAddr, markWrong+"\n", "--user", "root:"+markRoot, "user", "passwd", markUName, "--interactive=false")
	if err != nil || res.Code != 0 {
		t.Errorf("%s: etcdctl user passwd: got %+v, %v; want exit 0", p, res, err)
	}

	_, err = root.RoleRevokePermission(ctx, "producer", "/q/ch:events/p/", "/q/ch:events/p0")
	must("role revoke-permission", err)
	_, err = root.UserRevokeRole(ctx, markUName, "producer")
	must("user revoke-role", err)
	_, err = root.RoleDelete(ctx, "producer")
	must("role delete", err)
	_, err = root.UserDelete(ctx, markUName)
	must("user delete", err)
	_, err = root.AuthDisable(ctx)
	must("auth disable", err)
	if _, err := cli.Authenticate(ctx, "root", markRoot); err == nil || err.Error() != rpctypes.ErrAuthNotEnabled.Error() {
		t.Errorf("%s: authenticate with auth disabled: got %v, want %v", p, err, rpctypes.ErrAuthNotEnabled)
	}
	if p.Kind == "chute" {
		st, err := cli.AuthStatus(ctx)
		must("auth status", err)
		if st.Enabled {
			t.Errorf("%s: auth status after auth disable: got enabled, want disabled", p)
		}
	}
	return tokens
}

// tokenParts are what of token must not leak: the token, and for a simple
// token (random.index) its random part, for a JWT its signature.
func tokenParts(token string) []string {
	parts := []string{token}
	fields := strings.Split(token, ".")
	switch {
	case len(fields) == 2 && len(fields[0]) >= 8:
		parts = append(parts, fields[0])
	case len(fields) == 3 && len(fields[2]) >= 16:
		parts = append(parts, fields[2])
	}
	return parts
}

// TestAuth_secrets_neverLeak makes every Auth call, and authenticates
// with clientv3 and etcdctl, right and wrong, with marker passwords, on
// etcd 3.4 (which proves the calls are etcd's) and on a node logging at
// debug level that exports its spans: no marker password and no token
// the node issued appears in its log, /status, /metrics, key space or
// spans, and the span of the user's put carries the user name.
func TestAuth_secrets_neverLeak(t *testing.T) {
	t.Parallel()
	exerciseAuth(t, StartEtcd(t))

	r := otlptest.Start(t)
	p := StartChuteEnv(t, otlpEnv(r, "grpc"), "--log-level", "debug")
	tokens := exerciseAuth(t, p)
	if len(tokens) != 2 || tokens[0] == "" || tokens[0] == tokens[1] {
		t.Fatalf("tokens: got %q, want two different ones", tokens)
	}
	secrets := []string{markRoot, markUser, markNew, markWrong}
	for _, tok := range tokens {
		secrets = append(secrets, tokenParts(tok)...)
	}

	places := map[string]string{}
	for _, path := range []string{"/status", "/metrics"} {
		places[path] = httpGet(t, "http://"+p.MetricsAddr+path)
	}
	kvs, err := dump(clusterClient(t, p.ClientAddr))
	if err != nil {
		t.Fatalf("get every key: %v", err)
	}
	var all strings.Builder
	for k, v := range kvs {
		fmt.Fprintf(&all, "%s\n%s\n", k, v)
	}
	places["keys and values"] = all.String()

	// Stopping the node flushes its spans.
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	places["log"] = logText(t, p)
	r.WaitFor(t, traceTimeout, "the spans of the auth calls and of the user's put", func(spans []otlptest.Span) bool {
		for _, name := range []string{"etcdserverpb.Auth/UserAdd", "etcdserverpb.Auth/Authenticate",
			"etcdserverpb.Auth/UserChangePassword", "etcdserverpb.KV/Put"} {
			if _, ok := spanNamed(spans, name); !ok {
				return false
			}
		}
		return true
	})
	for where, text := range places {
		for _, s := range secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s holds the secret %q: ...%s...", where, s, text[max(0, i-200):min(len(text), i+len(s)+50)])
			}
		}
	}
	for _, s := range secrets {
		if r.Contains(s) {
			t.Errorf("an exported span holds the secret %q", s)
		}
	}
	userPut := false
	for _, s := range r.Spans() {
		if s.Name != "etcdserverpb.KV/Put" {
			continue
		}
		for _, v := range s.Attrs {
			if v == markUName {
				userPut = true
			}
		}
	}
	if !userPut {
		t.Errorf("no etcdserverpb.KV/Put span has an attribute %q, the user's name", markUName)
	}
}
