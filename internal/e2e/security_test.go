//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/testcerts"
	"chute/internal/testutil"
	"chute/internal/tlsfiles"
)

// certSet is a CA and the files of one certificate it signed, for 127.0.0.1
// and the test's loopback hosts.
type certSet struct {
	ca        *testcerts.CA
	caFile    string
	cert, key string
}

func newCertSet(t *testing.T, caName, cn string, hosts ...string) certSet {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, caName)
	s := certSet{ca: ca, caFile: ca.WriteCA(t, dir, "ca")}
	s.cert, s.key = ca.Issue(t, cn, append([]string{"127.0.0.1", "localhost"}, hosts...)...).Write(t, dir, cn)
	return s
}

// issue writes another certificate of the same CA.
func (s certSet) issue(t *testing.T, cn string, hosts ...string) (cert, key string) {
	t.Helper()
	return s.ca.Issue(t, cn, append([]string{"127.0.0.1", "localhost"}, hosts...)...).Write(t, t.TempDir(), cn)
}

// caPool returns the certificates of a CA file.
func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pool, err := tlsfiles.LoadCA(file)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// tlsClient returns a clientv3 client of endpoints over TLS, verifying the
// server with caFile and presenting cert/key when given.
func tlsClient(t *testing.T, caFile, cert, key string, endpoints ...string) *clientv3.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: caPool(t, caFile)}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestSecurity_clientCertAuth serves the etcd API on https:// with
// --client-cert-auth, next to a plain http:// URL: etcdctl and clientv3
// with a certificate of the trusted CA put, get and watch; without a
// certificate, or with one of another CA, they are refused.
func TestSecurity_clientCertAuth(t *testing.T) {
	t.Parallel()
	etcdctl := lookTool(t, "etcdctl")
	srv := newCertSet(t, "client CA", "server")
	clientCert, clientKey := srv.issue(t, "app")
	other := newCertSet(t, "another CA", "intruder")
	secure, plain := testutil.FreeAddr(t), testutil.FreeAddr(t)
	p := StartChute(t,
		"--listen-client-urls", "https://"+secure+",http://"+plain,
		"--cert-file", srv.cert, "--key-file", srv.key,
		"--client-cert-auth", "--trusted-ca-file", srv.caFile)
	endpoint := "https://" + secure

	// clientv3 with the trusted certificate: put, get, watch.
	cli := tlsClient(t, srv.caFile, clientCert, clientKey, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wch := cli.Watch(ctx, "/sec/", clientv3.WithPrefix())
	if _, err := cli.Put(ctx, "/sec/a", "1"); err != nil {
		t.Fatalf("clientv3 put with a trusted certificate: %v", err)
	}
	if got, err := cli.Get(ctx, "/sec/a"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" {
		t.Fatalf("clientv3 get: %v %v, want 1", got, err)
	}
	select {
	case wr := <-wch:
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "/sec/a" {
			t.Fatalf("watch: got %+v, want the put of /sec/a", wr.Events)
		}
	case <-ctx.Done():
		t.Fatal("watch over TLS: no event")
	}

	// etcdctl with --cacert/--cert/--key: put, get, watch.
	tlsArgs := []string{"--cacert", srv.caFile, "--cert", clientCert, "--key", clientKey}
	ctl := func(args ...string) (ctlResult, error) {
		return runEtcdctl(etcdctl, endpoint, "", append(append([]string{}, tlsArgs...), args...)...)
	}
	if res, err := ctl("put", "/sec/b", "2"); err != nil || res.Code != 0 {
		t.Fatalf("etcdctl put over mTLS: %v, exit %d: %s", err, res.Code, res.Stderr)
	}
	if res, err := ctl("get", "/sec/b", "--print-value-only"); err != nil || strings.TrimSpace(res.Stdout) != "2" {
		t.Fatalf("etcdctl get over mTLS: %v, %q %s", err, res.Stdout, res.Stderr)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	watch := etcdctlCmd(wctx, etcdctl, endpoint, append(append([]string{}, tlsArgs...), "watch", "/sec/c")...)
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	seen := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 256)
		for !strings.Contains(b.String(), "v3") {
			n, err := out.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		seen <- b.String()
	}()
	testutil.Eventually(t, 10*time.Second, "etcdctl watch over mTLS sees a put", func() error {
		if res, err := ctl("put", "/sec/c", "v3"); err != nil || res.Code != 0 {
			return fmt.Errorf("put: %v %s", err, res.Stderr)
		}
		select {
		case got := <-seen:
			if !strings.Contains(got, "PUT\n/sec/c\nv3") {
				return fmt.Errorf("watch printed %q", got)
			}
			seen <- got
			return nil
		case <-time.After(200 * time.Millisecond):
			return errors.New("no event yet")
		}
	})

	// Refused: no client certificate, or one of another CA.
	for name, c := range map[string]*clientv3.Client{
		"no client certificate":           tlsClient(t, srv.caFile, "", "", endpoint),
		"a certificate of another CA":     tlsClient(t, srv.caFile, other.cert, other.key, endpoint),
		"plain text on the https:// port": clusterClient(t, secure),
	} {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Put(cctx, "/sec/intruder", name)
		ccancel()
		if err == nil {
			t.Errorf("clientv3 with %s: put succeeded, want refused", name)
		}
	}
	for name, args := range map[string][]string{
		"no client certificate":       {"--cacert", srv.caFile},
		"a certificate of another CA": {"--cacert", srv.caFile, "--cert", other.cert, "--key", other.key},
	} {
		res, err := runEtcdctl(etcdctl, endpoint, "", append(args, "--dial-timeout", "2s", "--command-timeout", "3s", "put", "/sec/intruder", "x")...)
		if err != nil || res.Code == 0 {
			t.Errorf("etcdctl with %s: %v, exit %d, want a refusal", name, err, res.Code)
		}
	}
	ctx2, cancel2 := rpcCtx()
	defer cancel2()
	if got, err := cli.Get(ctx2, "/sec/intruder"); err != nil {
		t.Errorf("get with the trusted certificate after the refusals: %v", err)
	} else if len(got.Kvs) != 0 {
		t.Errorf("a refused client's put is stored: %v", got.Kvs)
	}

	// The plain http:// URL of the same node serves as before.
	plainCli := clusterClient(t, plain)
	if got, err := plainCli.Get(ctx2, "/sec/b"); err != nil || len(got.Kvs) != 1 {
		t.Errorf("plain URL next to the https one: %v %v", got, err)
	}
	_ = p
}

// TestSecurity_autoTLSCluster starts three nodes with --auto-tls and
// --peer-auto-tls on https:// URLs: they form one cluster, replicate over
// the TLS peer link, and serve etcdctl --insecure-skip-tls-verify.
func TestSecurity_autoTLSCluster(t *testing.T) {
	t.Parallel()
	etcdctl := lookTool(t, "etcdctl")
	c := newCluster(t)
	var nodes []*Proc
	var seed string
	for _, name := range []string{"a", "b", "c"} {
		pl := c.plan(name)
		args := []string{"--listen-client-urls", "https://" + pl.ClientAddr, "--listen-peer-urls", "https://" + pl.PeerAddr,
			"--auto-tls", "--peer-auto-tls"}
		if seed != "" {
			args = append(args, "--join", seed)
		}
		nodes = append(nodes, c.start(pl, args...))
		seed = nodes[0].GossipAddr
	}
	// etcdctl 3.4 skips verification only with --insecure-transport=false
	// too: without it, an https:// endpoint gets a verifying TLS config.
	ctl := func(p *Proc, args ...string) (ctlResult, error) {
		return runEtcdctl(etcdctl, "https://"+p.ClientAddr, "", append([]string{"--insecure-transport=false", "--insecure-skip-tls-verify"}, args...)...)
	}
	testutil.Eventually(t, membershipTimeout, "three members over auto TLS", func() error {
		res, err := ctl(nodes[2], "member", "list")
		if err != nil || strings.Count(res.Stdout, "started") != 3 {
			return fmt.Errorf("%v: %q %s", err, res.Stdout, res.Stderr)
		}
		return nil
	})
	if res, err := ctl(nodes[0], "put", "/auto/k", "v"); err != nil || res.Code != 0 {
		t.Fatalf("put on a: %v %s", err, res.Stderr)
	}
	for _, p := range nodes[1:] {
		testutil.Eventually(t, convergeTimeout, "the put replicated to "+p.Name+" over the TLS peer link", func() error {
			res, err := ctl(p, "get", "/auto/k", "--print-value-only", "--consistency=s")
			if err != nil || strings.TrimSpace(res.Stdout) != "v" {
				return fmt.Errorf("%v: %q %s", err, res.Stdout, res.Stderr)
			}
			return nil
		})
	}
	// Without --insecure-skip-tls-verify the self-signed certificate is
	// not trusted.
	res, err := runEtcdctl(etcdctl, "https://"+nodes[0].ClientAddr, "", "--dial-timeout", "2s", "--command-timeout", "3s", "get", "/auto/k")
	if err != nil || res.Code == 0 {
		t.Errorf("etcdctl verifying the self-signed certificate: %v, exit %d, want a failure", err, res.Code)
	}
}

// peerCalls calls the methods of the peer services (KV: ReadIndex,
// Propose, LeaseRenew; Raft: RequestVote; Queues: Forward, Hold, Consume,
// Ack) on addr over conn as a member of the cluster would, and returns
// the methods that succeeded.
func peerCalls(t *testing.T, conn *grpc.ClientConn, cluster string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(peer.OutgoingContext(context.Background(), gossip.ClusterID(cluster), 0xbad), 3*time.Second)
	defer cancel()
	kvc, raftc, queues := peerpb.NewKVClient(conn), peerpb.NewRaftClient(conn), peerpb.NewQueuesClient(conn)
	var ok []string
	try := func(name string, err error) {
		if err == nil {
			ok = append(ok, name)
		}
	}
	_, err := kvc.ReadIndex(ctx, &peerpb.ReadIndexRequest{})
	try("ReadIndex", err)
	cmd, err := proto.Marshal(&etcdserverpb.InternalRaftRequest{Put: &etcdserverpb.PutRequest{Key: []byte("/stranger"), Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kvc.Propose(ctx, &peerpb.ProposeRequest{Commands: [][]byte{cmd}})
	try("Propose", err)
	_, err = raftc.RequestVote(ctx, &peerpb.RaftRequest{})
	try("RequestVote", err)
	if s, err := queues.Forward(ctx); err == nil {
		err = s.Send(&peerpb.ForwardFrame{})
		if err == nil {
			_, err = s.Recv()
		}
		try("Forward", err)
	}
	_, err = queues.Hold(ctx, &peerpb.HoldRequest{})
	try("Hold", err)
	if s, err := queues.Consume(ctx, &peerpb.ConsumeRequest{Queue: "jobs"}); err == nil {
		_, err = s.Header()
		try("Consume", err)
	}
	_, err = queues.Ack(ctx, &peerpb.AckRequest{Queue: "jobs"})
	try("Ack", err)
	return ok
}

func dialPeer(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestSecurity_peerLinkClosedToStrangers runs two three-node clusters, one
// with peer mTLS from a CA and one with only --gossip-key. A process that
// holds the cluster name (the metadata every member sends) but no
// certificate of the CA, or not the gossip key, is refused on every method
// of the peer services; one with a member's credentials gets through,
// which shows that the refusals come from the authentication.
func TestSecurity_peerLinkClosedToStrangers(t *testing.T) {
	t.Parallel()
	t.Run("mTLS", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		pki := newCertSet(t, "peer CA", "member", c.hostRange()...)
		other := newCertSet(t, "another CA", "intruder")
		a, b := startPeerCluster(t, c, func(pl nodePlan) []string {
			return []string{"--listen-peer-urls", "https://" + pl.PeerAddr,
				"--peer-cert-file", pki.cert, "--peer-key-file", pki.key,
				"--peer-trusted-ca-file", pki.caFile, "--peer-client-cert-auth"}
		})
		member, err := tlsfiles.FromFiles(tlsfiles.Files{CertFile: pki.cert, KeyFile: pki.key, TrustedCAFile: pki.caFile}, tlsfiles.Suite{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		stranger, _ := tlsfiles.FromFiles(tlsfiles.Files{CertFile: other.cert, KeyFile: other.key, TrustedCAFile: pki.caFile}, tlsfiles.Suite{}, nil)
		noCert := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
		checkPeerRefusals(t, c, a, b, member.Credentials(), map[string]credentials.TransportCredentials{
			"plain text":                  insecure.NewCredentials(),
			"TLS without a certificate":   noCert,
			"a certificate of another CA": stranger.Credentials(),
		})
	})
	t.Run("gossip key", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(i * 7)
		}
		a, b := startPeerCluster(t, c, func(nodePlan) []string {
			return []string{"--gossip-key", base64.StdEncoding.EncodeToString(key)}
		})
		member, err := tlsfiles.Derived(key, c.name, "test", tlsfiles.Suite{})
		if err != nil {
			t.Fatal(err)
		}
		wrongKey, _ := tlsfiles.Derived(make([]byte, 32), c.name, "test", tlsfiles.Suite{})
		selfSigned, _ := tlsfiles.SelfSigned([]string{"127.0.0.1"}, time.Hour, tlsfiles.Suite{})
		checkPeerRefusals(t, c, a, b, member.Credentials(), map[string]credentials.TransportCredentials{
			"plain text":                  insecure.NewCredentials(),
			"TLS without a certificate":   credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}),
			"certificates of another key": wrongKey.Credentials(),
			"a self-signed certificate":   selfSigned.Credentials(),
		})
	})
}

// hostRange returns the addresses the cluster's next nodes get.
func (c *cluster) hostRange() []string {
	var out []string
	for i := c.hosts + 1; i <= c.hosts+4; i++ {
		out = append(out, fmt.Sprintf("127.0.%d.%d", c.subnet, i))
	}
	return out
}

// startPeerCluster starts three nodes with the peer flags of extra, joined
// to the first, and waits until a put on a is read on b.
func startPeerCluster(t *testing.T, c *cluster, extra func(nodePlan) []string) (a, b *Proc) {
	t.Helper()
	var nodes []*Proc
	for _, name := range []string{"a", "b", "c"} {
		pl := c.plan(name)
		args := extra(pl)
		if len(nodes) > 0 {
			args = append(args, "--join", nodes[0].GossipAddr)
		}
		nodes = append(nodes, c.start(pl, args...))
	}
	waitMembers(t, nodes, nodes)
	return nodes[0], nodes[1]
}

func checkPeerRefusals(t *testing.T, c *cluster, a, b *Proc, member credentials.TransportCredentials, strangers map[string]credentials.TransportCredentials) {
	t.Helper()
	clis := clientsOf(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := map[string]string{}
	for i := range 60 {
		k, v := fmt.Sprintf("/peer/k%02d", i), fmt.Sprintf("v%d", i)
		if _, err := clis[0].Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	waitConverged(t, []*Proc{a, b}, clis, want, convergeTimeout)

	for name, creds := range strangers {
		if ok := peerCalls(t, dialPeer(t, b.PeerAddr, creds), c.name); len(ok) > 0 {
			t.Errorf("%s: peer methods %v answered a stranger; want every one refused", name, ok)
		}
	}
	// A member's credentials get through (ReadIndex needs no payload).
	if ok := peerCalls(t, dialPeer(t, b.PeerAddr, member), c.name); len(ok) == 0 {
		t.Error("a member's credentials were refused too: the refusals prove nothing")
	}
	// The strangers changed nothing: the member's calls above only read,
	// except Propose, whose key is removed from the comparison.
	got, err := dump(clis[1])
	if err != nil {
		t.Fatal(err)
	}
	delete(got, "/stranger")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s on b: got %q, want %q", k, got[k], v)
		}
	}
}

// TestSecurity_certificateRotation replaces a node's certificate files and
// sends SIGHUP: new connections get the new certificate, without a
// restart; the node keeps serving.
func TestSecurity_certificateRotation(t *testing.T) {
	t.Parallel()
	pki := newCertSet(t, "rotation CA", "server")
	addr := testutil.FreeAddr(t)
	p := StartChute(t, "--listen-client-urls", "https://"+addr, "--cert-file", pki.cert, "--key-file", pki.key)
	pid := p.cmd.Process.Pid
	served := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: caPool(t, pki.caFile), ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("tls dial: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	before := served()
	next := pki.ca.Issue(t, "server", "127.0.0.1")
	if err := os.WriteFile(pki.cert, next.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.key, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the new certificate served", func() error {
		if got := served(); got.Cmp(before) == 0 {
			return errors.New("still the old certificate")
		}
		return nil
	})
	if p.cmd.Process.Pid != pid {
		t.Fatal("the node was restarted")
	}
	cli := tlsClient(t, pki.caFile, "", "", "https://"+addr)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := cli.Put(ctx, "/rotated", "yes"); err != nil {
		t.Fatalf("put after the rotation: %v", err)
	}
}

// TestSecurity_metricsTLS serves the metrics port over HTTPS with
// --metrics-cert-file/--metrics-key-file: /readyz and /metrics answer a
// client that verifies the certificate; plain HTTP gets no metrics.
func TestSecurity_metricsTLS(t *testing.T) {
	t.Parallel()
	pki := newCertSet(t, "metrics CA", "metrics")
	p := StartChute(t, "--metrics-cert-file", pki.cert, "--metrics-key-file", pki.key)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, pki.caFile)}}}
	for _, path := range []string{"/readyz", "/metrics"} {
		resp, err := client.Get("https://" + p.MetricsAddr + path)
		if err != nil {
			t.Fatalf("GET https %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("GET https %s: %s, %d bytes", path, resp.Status, len(body))
		}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.MetricsAddr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "# TYPE") {
			t.Fatalf("plain HTTP on the metrics port: %s, metrics served", resp.Status)
		}
	}
}

// TestSecurity_failClosedBinary runs the built binary with security flags
// that cannot be honoured as given: each exits 2 before serving, naming
// the flag.
func TestSecurity_failClosedBinary(t *testing.T) {
	t.Parallel()
	pki := newCertSet(t, "ca", "node")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen-client-urls", "https://127.0.0.1:2379"}, "is https: it needs a certificate: give --cert-file and --key-file, or --auto-tls"},
		{[]string{"--listen-peer-urls", "https://127.0.0.1:2380"}, "is https: it needs a certificate: give --peer-cert-file and --peer-key-file, --peer-auto-tls or --gossip-key"},
		{[]string{"--cert-file", pki.cert, "--key-file", pki.key}, "--cert-file: no https:// URL"},
		{[]string{"--listen-client-urls", "https://127.0.0.1:2379", "--cert-file", pki.cert, "--key-file", pki.key, "--client-cert-auth"}, "--client-cert-auth: needs a trusted CA file to verify client certificates with (--trusted-ca-file)"},
		{[]string{"--peer-auto-tls"}, "--peer-auto-tls: --listen-peer-urls must be https://"},
		{[]string{"--cors", "*"}, "cors: chute's JSON gateway makes no CORS or Host checks"},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, chuteBin, append([]string{"--name", "failclosed", "--metrics-listen", ""}, tc.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("chute %q: got %v, want exit status 2 (stderr %q)", tc.args, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("chute %q: stderr %q does not contain %q", tc.args, stderr.String(), tc.want)
		}
	}
}
