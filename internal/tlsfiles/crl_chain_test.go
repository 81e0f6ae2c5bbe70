package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSource_revokedIntermediate: a revocation list of the trusted
// root that revokes an intermediate CA refuses the client certificates
// that intermediate signed, as etcd's --client-crl-file and
// --peer-crl-file do (etcd checks the serial of every certificate the
// client presents, transport.checkCRL; etcd 3.4.23 refuses such a client
// with "certificate serial ... revoked"). Only the leaf was checked, so
// revoking a compromised intermediate let all it signed in.
func TestSource_revokedIntermediate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	sign := func(tmpl, parent *x509.Certificate, pub any, priv any) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	caTmpl := func(serial int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	}
	leafTmpl := func(serial int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	}
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM := func(c *x509.Certificate) *pem.Block { return &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw} }
	keyPEM := func(k *ecdsa.PrivateKey) *pem.Block {
		der, _ := x509.MarshalECPrivateKey(k)
		return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	}

	rootKey, intKey, srvKey, cliKey := key(), key(), key(), key()
	root := sign(caTmpl(1, "root"), caTmpl(1, "root"), &rootKey.PublicKey, rootKey)
	inter := sign(caTmpl(2, "intermediate"), root, &intKey.PublicKey, rootKey)
	srv := sign(leafTmpl(3, "server"), root, &srvKey.PublicKey, rootKey)
	cli := sign(leafTmpl(4, "client"), inter, &cliKey.PublicKey, intKey)
	crlDER, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: now, NextUpdate: now.Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: inter.SerialNumber, RevocationTime: now}}}, root, rootKey)
	if err != nil {
		t.Fatal(err)
	}

	server := mustSource(t, Files{
		CertFile: write("server.crt", certPEM(srv)), KeyFile: write("server.key", keyPEM(srvKey)),
		TrustedCAFile: write("root.crt", certPEM(root)), ClientCertAuth: true,
		CRLFile: write("crl.pem", &pem.Block{Type: "X509 CRL", Bytes: crlDER}),
	})
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(certPEM(cli)), pem.EncodeToMemory(keyPEM(cliKey)))
	if err != nil {
		t.Fatal(err)
	}
	pair.Certificate = append(pair.Certificate, inter.Raw) // the chain: leaf, intermediate
	pool := x509.NewCertPool()
	pool.AddCert(root)
	client := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	if se, _ := handshake(t, server.ServerConfig(), client, "127.0.0.1"); se == nil {
		t.Fatal("a client certificate signed by a revoked intermediate CA was accepted")
	}
	// The same chain with a list that revokes nothing of it gets in.
	crlDER, err = x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(2),
		ThisUpdate: now, NextUpdate: now.Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(99), RevocationTime: now}}}, root, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	server = mustSource(t, Files{
		CertFile: write("server2.crt", certPEM(srv)), KeyFile: write("server2.key", keyPEM(srvKey)),
		TrustedCAFile: write("root2.crt", certPEM(root)), ClientCertAuth: true,
		CRLFile: write("crl2.pem", &pem.Block{Type: "X509 CRL", Bytes: crlDER}),
	})
	if se, ce := handshake(t, server.ServerConfig(), client, "127.0.0.1"); se != nil || ce != nil {
		t.Fatalf("a chain the list does not revoke was refused: server %v, client %v", se, ce)
	}
}
