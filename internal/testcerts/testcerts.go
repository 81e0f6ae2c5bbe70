// Package testcerts makes certificate authorities and certificates for
// tests: a CA, leaf certificates it signs for loopback hosts, and their PEM
// files in a test's temporary directory. Keys are ECDSA P-256; certificates
// are valid from an hour ago for a day, for both server and client use.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Pair is a leaf certificate and its private key, PEM encoded.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA returns a self-signed CA whose common name is name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, nil)
}

// Intermediate returns a CA whose common name is name, signed by ca: a
// client presents the certificates it issues with the intermediate's
// (its CertPEM) after them.
func (ca *CA) Intermediate(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, ca)
}

// newCA returns a CA whose common name is name, signed by parent, or by
// itself when parent is nil.
func newCA(t testing.TB, name string, parent *CA) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.Cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatalf("testcerts: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcerts: CA: %v", err)
	}
	return &CA{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), key: key}
}

// Issue signs a certificate with common name cn, valid for the hosts (IP
// addresses or DNS names) as server and as client.
func (ca *CA) Issue(t testing.TB, cn string, hosts ...string) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcerts: issue %s: %v", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcerts: issue %s: %v", cn, err)
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// WriteCA writes the CA's certificate to dir/name.pem and returns the path.
func (ca *CA) WriteCA(t testing.TB, dir, name string) string {
	t.Helper()
	return write(t, filepath.Join(dir, name+".pem"), ca.CertPEM)
}

// Write writes the pair to dir/name.pem and dir/name-key.pem and returns
// the two paths.
func (p Pair) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	return write(t, filepath.Join(dir, name+".pem"), p.CertPEM),
		write(t, filepath.Join(dir, name+"-key.pem"), p.KeyPEM)
}

func write(t testing.TB, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcerts: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testcerts: serial: %v", err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WriteCRL writes a PEM revocation list of the CA that revokes serials to
// dir/name.pem and returns the path.
func (ca *CA) WriteCRL(t testing.TB, dir, name string, serials ...*big.Int) string {
	t.Helper()
	var entries []x509.RevocationListEntry
	for _, s := range serials {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour),
		RevokedCertificateEntries: entries,
	}, ca.Cert, ca.key)
	if err != nil {
		t.Fatalf("testcerts: revocation list: %v", err)
	}
	return write(t, filepath.Join(dir, name+".pem"), pemBlock("X509 CRL", der))
}
