package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"chute/internal/testcerts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcpPair returns both ends of a loopback TCP connection, with deadlines.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	for _, c := range []net.Conn{a, b} {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	return a, b
}

// handshake runs a TLS handshake between a server and a client config over
// loopback TCP and returns each side's error.
func handshake(t *testing.T, server, client *tls.Config, serverName string) (serverErr, clientErr error) {
	t.Helper()
	a, b := tcpPair(t)
	c := client.Clone()
	if c.ServerName == "" {
		c.ServerName = serverName
	}
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, server)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3 verifies the client's certificate after the
			// client's handshake returns: read once to see the verdict.
			_, err = s.Read(make([]byte, 1))
		}
		_ = a.Close()
		done <- err
	}()
	cc := tls.Client(b, c)
	clientErr = cc.Handshake()
	if clientErr == nil {
		_, _ = cc.Write([]byte{1})
	}
	_ = b.Close()
	return <-done, clientErr
}

type node struct {
	dir           string
	cert, key, ca string
	files         Files
}

func newFiles(t *testing.T, ca *testcerts.CA, cn string) node {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, cn, "127.0.0.1", "localhost").Write(t, dir, cn)
	caFile := ca.WriteCA(t, dir, "ca")
	return node{dir: dir, cert: cert, key: key, ca: caFile,
		files: Files{CertFile: cert, KeyFile: key, TrustedCAFile: caFile, ClientCertAuth: true}}
}

func mustSource(t *testing.T, f Files) *Source {
	t.Helper()
	s, err := FromFiles(f, Suite{}, nil)
	if err != nil {
		t.Fatalf("FromFiles: %v", err)
	}
	return s
}

func TestSource_mutualTLS(t *testing.T) {
	ca, other := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "other")
	srv := mustSource(t, newFiles(t, ca, "server").files)
	good := mustSource(t, newFiles(t, ca, "client").files)
	stranger := newFiles(t, other, "stranger")
	stranger.files.TrustedCAFile = newFiles(t, ca, "x").ca // trusts the server, is not trusted
	bad := mustSource(t, stranger.files)
	noCert := mustSource(t, Files{TrustedCAFile: stranger.files.TrustedCAFile})

	if se, ce := handshake(t, srv.ServerConfig(), good.ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil || ce != nil {
		t.Fatalf("same CA: server %v, client %v; want both nil", se, ce)
	}
	if se, _ := handshake(t, srv.ServerConfig(), bad.ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil {
		t.Fatal("client certificate of another CA accepted")
	}
	if se, _ := handshake(t, srv.ServerConfig(), noCert.ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil {
		t.Fatal("client without a certificate accepted")
	}
	// The dialer verifies the server: a server of another CA is refused.
	if _, ce := handshake(t, bad.ServerConfig(), good.ClientConfig("127.0.0.1"), "127.0.0.1"); ce == nil {
		t.Fatal("server certificate of another CA accepted by the dialer")
	}
	// ... and its host name.
	if _, ce := handshake(t, srv.ServerConfig(), good.ClientConfig("127.0.0.9"), "127.0.0.9"); ce == nil {
		t.Fatal("server certificate for another host accepted by the dialer")
	}
}

// TestSource_trustedCAAlone: a server given a trusted CA and no
// ClientCertAuth requires client certificates all the same, as etcd's
// --trusted-ca-file does; it let a client without one in.
func TestSource_trustedCAAlone(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	sf := newFiles(t, ca, "server").files
	sf.ClientCertAuth = false
	srv := mustSource(t, sf)
	good := mustSource(t, newFiles(t, ca, "client").files)
	noCert := mustSource(t, Files{TrustedCAFile: sf.TrustedCAFile})
	if se, ce := handshake(t, srv.ServerConfig(), good.ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil || ce != nil {
		t.Fatalf("client certificate of the CA: server %v, client %v; want both nil", se, ce)
	}
	if se, _ := handshake(t, srv.ServerConfig(), noCert.ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil {
		t.Fatal("client without a certificate accepted by a server with a trusted CA")
	}
}

func TestSource_allowedNames(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	sf := newFiles(t, ca, "server").files
	sf.AllowedCN = "member-1"
	srv := mustSource(t, sf)
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, newFiles(t, ca, "member-1").files).ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil {
		t.Fatalf("allowed CN refused: %v", se)
	}
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, newFiles(t, ca, "member-2").files).ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil || !strings.Contains(se.Error(), "member-2") {
		t.Fatalf("other CN: got %v, want a refusal naming member-2", se)
	}

	sf.AllowedCN, sf.AllowedHostname = "", "peer.example"
	srv = mustSource(t, sf)
	dir := t.TempDir()
	c, k := ca.Issue(t, "x", "peer.example").Write(t, dir, "named")
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, Files{CertFile: c, KeyFile: k, TrustedCAFile: sf.TrustedCAFile}).ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil {
		t.Fatalf("allowed host name refused: %v", se)
	}
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, newFiles(t, ca, "y").files).ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil {
		t.Fatal("certificate for another host name accepted")
	}
}

// leafOf parses the first certificate of a PEM file.
func leafOf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestSource_revocationList(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	cl := newFiles(t, ca, "client")
	leaf := leafOf(t, cl.cert)
	crlFile := ca.WriteCRL(t, cl.dir, "crl", leaf.SerialNumber)
	sf := newFiles(t, ca, "server").files
	sf.CRLFile = crlFile
	srv := mustSource(t, sf)
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, cl.files).ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil || !strings.Contains(se.Error(), "revoked") {
		t.Fatalf("revoked certificate: got %v, want a refusal", se)
	}
	if se, _ := handshake(t, srv.ServerConfig(), mustSource(t, newFiles(t, ca, "other").files).ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil {
		t.Fatalf("certificate not on the list refused: %v", se)
	}
}

// served returns the serial of the certificate the server presents.
func served(t *testing.T, srv *Source, trust *Source) *big.Int {
	t.Helper()
	a, b := tcpPair(t)
	go func() { _ = tls.Server(a, srv.ServerConfig()).Handshake() }()
	cc := tls.Client(b, trust.ClientConfig("127.0.0.1"))
	if err := cc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return cc.ConnectionState().PeerCertificates[0].SerialNumber
}

func TestSource_rotation(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	sn := newFiles(t, ca, "server")
	sf := sn.files
	sf.ClientCertAuth = false
	srv := mustSource(t, sf)
	clock := time.Now()
	srv.now = func() time.Time { return clock }
	trust := mustSource(t, Files{TrustedCAFile: sn.ca})

	first := served(t, srv, trust)
	// A new certificate written over the old files.
	next := ca.Issue(t, "server", "127.0.0.1")
	if err := os.WriteFile(sn.cert, next.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sn.key, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(t, srv, trust); got.Cmp(first) != 0 {
		t.Fatal("files read again before the check interval passed")
	}
	clock = clock.Add(checkInterval)
	second := served(t, srv, trust)
	if second.Cmp(first) == 0 {
		t.Fatal("changed files not read again at the next handshake after the interval")
	}

	// A half-written file keeps the last good certificate.
	if err := os.WriteFile(sn.cert, []byte("-----BEGIN CERTIFICATE-----\ngarbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(checkInterval)
	if got := served(t, srv, trust); got.Cmp(second) != 0 {
		t.Fatal("a broken file replaced the certificate in use")
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("Reload of a broken file: nil error")
	}

	// Reload reads at once, whatever the interval.
	third := ca.Issue(t, "server", "127.0.0.1")
	_ = os.WriteFile(sn.cert, third.CertPEM, 0o600)
	_ = os.WriteFile(sn.key, third.KeyPEM, 0o600)
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(t, srv, trust); got.Cmp(second) == 0 {
		t.Fatal("Reload did not take the new certificate")
	}
}

func TestDerived(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := Derived(key, "prod", "a", Suite{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Derived(key, "prod", "b", Suite{})
	otherKey, _ := Derived([]byte("fedcba9876543210fedcba9876543210"), "prod", "c", Suite{})
	otherCluster, _ := Derived(key, "staging", "d", Suite{})

	if se, ce := handshake(t, a.ServerConfig(), b.ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil || ce != nil {
		t.Fatalf("same key: server %v, client %v; want both nil", se, ce)
	}
	for name, s := range map[string]*Source{"another key": otherKey, "another cluster": otherCluster} {
		if se, _ := handshake(t, a.ServerConfig(), s.ClientConfig("127.0.0.1"), "127.0.0.1"); se == nil {
			t.Errorf("%s: server accepted the dialer", name)
		}
		if _, ce := handshake(t, s.ServerConfig(), a.ClientConfig("127.0.0.1"), "127.0.0.1"); ce == nil {
			t.Errorf("%s: dialer accepted the server", name)
		}
	}
	// A dialer with no certificate at all.
	if se, _ := handshake(t, a.ServerConfig(), &tls.Config{InsecureSkipVerify: true}, "127.0.0.1"); se == nil {
		t.Error("server accepted a dialer without a certificate")
	}
}

func TestSelfSigned(t *testing.T) {
	s, err := SelfSigned([]string{"127.0.0.1"}, time.Hour, Suite{})
	if err != nil {
		t.Fatal(err)
	}
	if se, ce := handshake(t, s.ServerConfig(), s.ClientConfig("127.0.0.1"), "127.0.0.1"); se != nil || ce != nil {
		t.Fatalf("auto TLS: server %v, client %v; want both nil", se, ce)
	}
	// A verifying dialer refuses it.
	if _, ce := handshake(t, s.ServerConfig(), &tls.Config{}, "127.0.0.1"); ce == nil {
		t.Fatal("self-signed certificate verified against the system roots")
	}
}

func TestParse(t *testing.T) {
	if v, err := ParseVersion("TLS1.3"); err != nil || v != tls.VersionTLS13 {
		t.Errorf("TLS1.3: got %v, %v", v, err)
	}
	for _, bad := range []string{"TLS1.0", "TLS1.1", "1.2", "SSL3"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): nil error", bad)
		}
	}
	ids, err := ParseCipherSuites([]string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"})
	if err != nil || len(ids) != 1 || ids[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("good suite: got %v, %v", ids, err)
	}
	if _, err := ParseCipherSuites([]string{"TLS_RSA_WITH_RC4_128_SHA"}); err == nil || !strings.Contains(err.Error(), "insecure") {
		t.Errorf("RC4: got %v, want insecure", err)
	}
	if _, err := ParseCipherSuites([]string{"nope"}); err == nil {
		t.Error("unknown suite: nil error")
	}
}

// resumed connects with client, whose session cache it keeps, and
// returns the server's verdict and whether the session was resumed. The
// client reads once, which takes in TLS 1.3's session ticket.
func resumed(t *testing.T, server, client *tls.Config) (serverErr error, didResume bool) {
	t.Helper()
	a, b := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, server)
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		if err == nil {
			_, err = s.Read(make([]byte, 1))
		}
		_ = a.Close()
		done <- err
	}()
	cc := tls.Client(b, client)
	if err := cc.Handshake(); err == nil {
		didResume = cc.ConnectionState().DidResume
		if _, err := cc.Read(make([]byte, 1)); err == nil {
			_, _ = cc.Write([]byte{1})
		}
	}
	_ = b.Close()
	return <-done, didResume
}

// TestSource_revocationOfAResumedSession: a client certificate revoked
// after its session began is refused when the client resumes that
// session, as on a new handshake. Go checks VerifyPeerCertificate on
// full handshakes only: the resumption got in without a certificate.
func TestSource_revocationOfAResumedSession(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	cl := newFiles(t, ca, "client")
	leaf := leafOf(t, cl.cert)
	sf := newFiles(t, ca, "server").files
	sf.CRLFile = ca.WriteCRL(t, t.TempDir(), "crl")
	srv := mustSource(t, sf)
	clock := time.Now()
	srv.now = func() time.Time { return clock }
	client := mustSource(t, cl.files).ClientConfig("127.0.0.1")
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	server := srv.ServerConfig() // one listener's: its ticket keys

	if se, again := resumed(t, server, client); se != nil || again {
		t.Fatalf("first connection: server %v, resumed %v; want a full handshake accepted", se, again)
	}
	if se, again := resumed(t, server, client); se != nil || !again {
		t.Fatalf("second connection: server %v, resumed %v; want the session resumed and accepted", se, again)
	}
	crl, err := os.ReadFile(ca.WriteCRL(t, t.TempDir(), "crl", leaf.SerialNumber))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf.CRLFile, crl, 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(checkInterval)
	if se, _ := resumed(t, server, client); se == nil || !strings.Contains(se.Error(), "revoked") {
		t.Fatalf("resuming with a certificate revoked since: server %v, want it refused as revoked", se)
	}
}
