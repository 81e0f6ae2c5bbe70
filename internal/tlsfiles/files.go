package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Files names the certificate files of one TLS endpoint, with the meaning
// etcd gives its flags of the same names.
type Files struct {
	// CertFile and KeyFile are this side's certificate and key, PEM: both
	// or neither.
	CertFile, KeyFile string

	// TrustedCAFile is a PEM bundle. A server requires client
	// certificates it verifies, as etcd's does, ClientCertAuth set or not;
	// a dialer verifies servers with it. Empty: a dialer uses the system
	// roots.
	TrustedCAFile string

	// ClientCertAuth makes a server require a client certificate that
	// TrustedCAFile verifies.
	ClientCertAuth bool

	// CRLFile is a PEM or DER certificate revocation list: a server refuses
	// client certificates it lists. Empty: no list.
	CRLFile string

	// AllowedCN, when set, is the only common name a server accepts in a
	// client certificate.
	AllowedCN string

	// AllowedHostname, when set, is a host name a client certificate must
	// be valid for.
	AllowedHostname string

	// ClientCertFile and ClientKeyFile are the certificate a dialer
	// presents. Empty: CertFile and KeyFile.
	ClientCertFile, ClientKeyFile string
}

// Empty reports whether no file is named.
func (f Files) Empty() bool {
	return f.CertFile == "" && f.KeyFile == "" && f.TrustedCAFile == "" && f.CRLFile == "" &&
		f.ClientCertFile == "" && f.ClientKeyFile == ""
}

// Suite is what every TLS endpoint of a node shares, listeners and
// dialers (ClickHouse's too): protocol versions and cipher suites.
type Suite struct {
	// MinVersion is the lowest TLS version spoken. Zero: TLS 1.2.
	MinVersion uint16
	// MaxVersion is the highest. Zero: the highest Go speaks.
	MaxVersion uint16
	// CipherSuites are the TLS 1.2 suites offered, in order. Empty: Go's
	// defaults. TLS 1.3's suites are not configurable.
	CipherSuites []uint16
}

// Apply sets the versions and cipher suites of c: those of s, TLS 1.2
// at least.
func (s Suite) Apply(c *tls.Config) {
	c.MinVersion = s.MinVersion
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	c.MaxVersion = s.MaxVersion
	c.CipherSuites = s.CipherSuites
}

// IsZero reports whether s sets nothing: Go's defaults, TLS 1.2 at least.
func (s Suite) IsZero() bool {
	return s.MinVersion == 0 && s.MaxVersion == 0 && len(s.CipherSuites) == 0
}

// ParseVersion parses etcd's names of TLS versions: TLS1.2 or TLS1.3
// (TLS1.0 and TLS1.1 are refused: Go's crypto/tls no longer offers them
// by default and neither does chute). Empty is zero.
func ParseVersion(s string) (uint16, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "":
		return 0, nil
	case "TLS1.2":
		return tls.VersionTLS12, nil
	case "TLS1.3":
		return tls.VersionTLS13, nil
	case "TLS1.0", "TLS1.1":
		return 0, fmt.Errorf("%q is insecure; use TLS1.2 or TLS1.3", s)
	}
	return 0, fmt.Errorf("%q is not TLS1.2 or TLS1.3", s)
}

// ParseCipherSuites parses IANA cipher suite names, as etcd's
// --cipher-suites takes them. Suites Go deems insecure are refused.
func ParseCipherSuites(names []string) ([]uint16, error) {
	var out []uint16
	for _, n := range names {
		i := slices.IndexFunc(tls.CipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == n })
		if i < 0 {
			if slices.ContainsFunc(tls.InsecureCipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == n }) {
				return nil, fmt.Errorf("cipher suite %q is insecure", n)
			}
			return nil, fmt.Errorf("unknown cipher suite %q", n)
		}
		out = append(out, tls.CipherSuites()[i].ID)
	}
	return out, nil
}

// CheckKeyPair reports whether the certificate and key files exist, parse
// and match.
func CheckKeyPair(certFile, keyFile string) error {
	_, err := tls.LoadX509KeyPair(certFile, keyFile)
	return err
}

// CheckCA reports whether file holds at least one PEM certificate.
func CheckCA(file string) error {
	_, err := LoadCA(file)
	return err
}

// CheckCRL reports whether file holds a certificate revocation list.
func CheckCRL(file string) error {
	_, err := loadCRL(file)
	return err
}

// LoadCA returns the certificates of the PEM file as a pool.
func LoadCA(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// crl is a parsed revocation list: the serials it revokes, by issuer.
type crl struct {
	issuer  []byte // raw subject of the issuer
	serials map[string]bool
}

func loadCRL(file string) (*crl, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(data, []byte("-----BEGIN X509 CRL-----")) {
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "X509 CRL" {
			return nil, fmt.Errorf("%s: no PEM X509 CRL in it", file)
		}
		data = block.Bytes
	}
	list, err := x509.ParseRevocationList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := &crl{issuer: list.RawIssuer, serials: make(map[string]bool, len(list.RevokedCertificateEntries))}
	for _, e := range list.RevokedCertificateEntries {
		c.serials[e.SerialNumber.String()] = true
	}
	return c, nil
}

// revokes reports whether the list revokes cert.
func (c *crl) revokes(cert *x509.Certificate) bool {
	return c != nil && bytes.Equal(c.issuer, cert.RawIssuer) && c.serials[cert.SerialNumber.String()]
}

// stamp identifies one version of a set of files: their sizes and
// modification times. A changed stamp means "read them again".
type stamp string

func stampOf(files ...string) stamp {
	var b strings.Builder
	for _, f := range files {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", f)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp(b.String())
}

// errNoCertificate is returned to a handshake when no certificate could be
// loaded at all.
var errNoCertificate = errors.New("tlsfiles: no certificate loaded")

// checkInterval bounds how often the files are looked at for changes:
// at most once per interval, on a handshake.
const checkInterval = time.Second
