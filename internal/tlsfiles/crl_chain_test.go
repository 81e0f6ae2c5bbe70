package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"testing"

	"chute/internal/testcerts"
)

// TestSource_revokedIntermediate: a revocation list of the trusted root
// that revokes an intermediate CA refuses the client certificates that
// intermediate signed, as etcd's --client-crl-file and --peer-crl-file do
// (etcd checks the serial of every certificate the client presents;
// etcd 3.4.23 refuses such a client with "certificate serial ...
// revoked"). Only the leaf was checked, so revoking a compromised
// intermediate let all it signed in. A list that revokes nothing of the
// chain lets it in.
func TestSource_revokedIntermediate(t *testing.T) {
	root := testcerts.NewCA(t, "root")
	inter := root.Intermediate(t, "intermediate")
	dir := t.TempDir()
	srvCert, srvKey := root.Issue(t, "server", "127.0.0.1").Write(t, dir, "server")
	leaf := inter.Issue(t, "client", "127.0.0.1")
	pair, err := tls.X509KeyPair(append(leaf.CertPEM, inter.CertPEM...), leaf.KeyPEM) // the chain: leaf, intermediate
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root.Cert)
	client := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	for _, tc := range []struct {
		name    string
		revoked *big.Int
		refused bool
	}{
		{"intermediate revoked", inter.Cert.SerialNumber, true},
		{"another serial revoked", big.NewInt(99), false},
	} {
		server := mustSource(t, Files{
			CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: root.WriteCA(t, dir, "root"), ClientCertAuth: true,
			CRLFile: root.WriteCRL(t, t.TempDir(), "crl", tc.revoked),
		})
		se, ce := handshake(t, server.ServerConfig(), client, "127.0.0.1")
		if tc.refused && se == nil {
			t.Errorf("%s: a client certificate signed by a revoked intermediate CA was accepted", tc.name)
		}
		if !tc.refused && (se != nil || ce != nil) {
			t.Errorf("%s: a chain the list does not revoke was refused: server %v, client %v", tc.name, se, ce)
		}
	}
}
