package tlsfiles

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SelfSigned returns a Source serving a certificate made now for hosts (IP
// addresses or DNS names), signed by its own key and valid for validity
// from an hour ago: etcd's --auto-tls. Its dialers do not verify servers,
// as etcd's auto-TLS peers do not; its servers verify no client.
func SelfSigned(hosts []string, validity time.Duration, suite Suite) (*Source, error) {
	if err := suite.Validate(); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: self-signed key: %w", err)
	}
	now := time.Now()
	tmpl := leafTemplate("chute", now.Add(-time.Hour), now.Add(validity), hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: self-signed certificate: %w", err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &Source{suite: suite, now: time.Now, skipVerify: true, st: &state{cert: cert, clientCert: cert}}, nil
}

// DerivedServerName is the name every derived certificate is issued for
// and every derived dialer verifies.
const DerivedServerName = "peer.chute.invalid"

// Derived returns a mutually authenticated Source from a secret every
// member shares (the gossip key): a CA whose Ed25519 key is derived from
// the secret and the cluster name with HKDF-SHA256, so every member
// derives the same CA without exchanging anything, and a leaf certificate
// for this member, signed by it, with a fresh key. Its servers require a
// client certificate from that CA and its dialers verify the server's:
// a process without the secret can complete no handshake.
func Derived(secret []byte, cluster, member string, suite Suite) (*Source, error) {
	if err := suite.Validate(); err != nil {
		return nil, err
	}
	seed, err := hkdf.Key(sha256.New, secret, []byte(cluster), "chute peer link CA v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: derive CA: %w", err)
	}
	caKey := ed25519.NewKeyFromSeed(seed)
	// Fixed fields: every member builds the same CA certificate.
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "chute peer CA", Organization: []string{cluster}},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: derive CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: derive CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: member key: %w", err)
	}
	now := time.Now()
	tmpl := leafTemplate(member, now.Add(-time.Hour), ca.NotAfter, []string{DerivedServerName})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, crypto.Signer(caKey))
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: member certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &Source{
		// No files to read again; ClientCertAuth makes its servers
		// require a certificate of the derived CA.
		files:      Files{ClientCertAuth: true},
		suite:      suite,
		now:        time.Now,
		serverName: DerivedServerName,
		st:         &state{cert: cert, clientCert: cert, pool: pool},
	}, nil
}

func leafTemplate(cn string, from, until time.Time, hosts []string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	t := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    from,
		NotAfter:     until,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else if h != "" {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	return t
}
