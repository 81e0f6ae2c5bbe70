package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Source is the TLS identity and trust of one endpoint: read from files
// (and read again when they change, or on Reload), self-signed at start
// (etcd's --auto-tls), or derived from a shared secret. Its configs are
// built per handshake from what it holds then, so a rotated certificate is
// used by the next connection without a restart. Safe for concurrent use.
type Source struct {
	files Files
	suite Suite
	log   *slog.Logger
	now   func() time.Time

	// skipVerify: a dialer does not verify the server (self-signed
	// certificates: etcd's --peer-auto-tls does the same).
	skipVerify bool
	// serverName, when set, is the name a dialer verifies in the server's
	// certificate instead of the dialed host.
	serverName string

	mu      sync.Mutex // guards checked, stamp and st
	checked time.Time  // when the files were last looked at
	stamp   stamp      // the files' sizes and times when st was read
	st      *state
}

// state is what a Source holds at one moment.
type state struct {
	cert       *tls.Certificate // presented by a server
	clientCert *tls.Certificate // presented by a dialer
	pool       *x509.CertPool   // verifies the other side; nil: system roots (dialer) or no verification (server)
	crl        *crl
}

// FromFiles validates files and suite, reads files now and whenever they
// change. log receives a WARN
// when changed files cannot be read (the old certificate stays in use);
// nil discards it.
func FromFiles(files Files, suite Suite, log *slog.Logger) (*Source, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if err := suite.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: files, suite: suite, log: log, now: time.Now}
	stamp := s.fileStamp() // before the read: a change after it is read again
	st, err := s.read()
	if err != nil {
		return nil, err
	}
	s.st, s.stamp, s.checked = st, stamp, s.now()
	return s, nil
}

func (s *Source) fileStamp() stamp {
	f := s.files
	return stampOf(f.CertFile, f.KeyFile, f.TrustedCAFile, f.CRLFile, f.ClientCertFile, f.ClientKeyFile)
}

// read loads every file named.
func (s *Source) read() (*state, error) {
	f := s.files
	st := &state{}
	if f.CertFile != "" || f.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: certificate: %w", err)
		}
		st.cert, st.clientCert = &cert, &cert
	}
	if f.ClientCertFile != "" || f.ClientKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: client certificate: %w", err)
		}
		st.clientCert = &cert
	}
	if f.TrustedCAFile != "" {
		pool, err := LoadCA(f.TrustedCAFile)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: trusted CA: %w", err)
		}
		st.pool = pool
	}
	if f.CRLFile != "" {
		list, err := loadCRL(f.CRLFile)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: revocation list: %w", err)
		}
		st.crl = list
	}
	return st, nil
}

// Reload reads the files again now. On an error the Source keeps what it
// had. A Source not made from files has nothing to reload.
func (s *Source) Reload() error {
	if s.files.Empty() {
		return nil
	}
	// The stamp before the read, as current takes it: files rotated
	// between the two are read again at the next look, not taken for
	// read.
	stamp := s.fileStamp()
	st, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked = s.now()
	if err != nil {
		return err
	}
	s.st, s.stamp = st, stamp
	return nil
}

// current returns what the Source holds, reading the files again first if
// they changed since they were last looked at (at most once a second).
func (s *Source) current() *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files.Empty() || s.now().Sub(s.checked) < checkInterval {
		return s.st
	}
	s.checked = s.now()
	if now := s.fileStamp(); now != s.stamp {
		st, err := s.read()
		if err != nil {
			// A file half written during a rotation: keep serving the
			// old certificate and look again at the next handshake.
			s.log.Warn("tls files changed but cannot be read; the old ones stay in use", "err", err)
			return s.st
		}
		s.st, s.stamp = st, now
		s.log.Info("tls files changed: read again", "cert", s.files.CertFile)
	}
	return s.st
}

// ServerConfig returns the config of a TLS listener: each handshake gets
// the certificate and trust held at that moment.
func (s *Source) ServerConfig() *tls.Config {
	c := &tls.Config{}
	s.suite.Apply(c)
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return s.serverConfig(s.current())
	}
	return c
}

func (s *Source) serverConfig(st *state) (*tls.Config, error) {
	if st.cert == nil {
		return nil, errNoCertificate
	}
	c := &tls.Config{Certificates: []tls.Certificate{*st.cert}}
	s.suite.Apply(c)
	if s.files.ClientCertAuth || st.pool != nil {
		// A trusted CA alone requires client certificates too, as in
		// etcd (transport.TLSInfo.ServerConfig): the same command line
		// let clients without one in.
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, st.pool
	}
	if s.files.AllowedCN != "" || s.files.AllowedHostname != "" || st.crl != nil {
		// VerifyConnection, not VerifyPeerCertificate: Go calls the
		// latter on full handshakes only, so a client that resumed a
		// session (tickets last 7 days) got past a name or a revocation
		// list changed since it first connected. (Go itself verifies a
		// resumed session's chains against the CAs trusted now.)
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // no certificate offered where none is required
			}
			if err := s.checkClient(cs.PeerCertificates[0], st.crl); err != nil {
				return err
			}
			return revokedCA(cs.VerifiedChains, st.crl)
		}
	}
	return c, nil
}

// checkClient applies the allowed name and the revocation list to a
// verified client certificate.
func (s *Source) checkClient(leaf *x509.Certificate, list *crl) error {
	if cn := s.files.AllowedCN; cn != "" && leaf.Subject.CommonName != cn {
		return fmt.Errorf("tlsfiles: client certificate CN %q is not the allowed %q", leaf.Subject.CommonName, cn)
	}
	if h := s.files.AllowedHostname; h != "" {
		if err := leaf.VerifyHostname(h); err != nil {
			return fmt.Errorf("tlsfiles: client certificate is not for the allowed host name: %w", err)
		}
	}
	if list.revokes(leaf) {
		return fmt.Errorf("tlsfiles: client certificate %s is revoked", leaf.SerialNumber)
	}
	return nil
}

// revokedCA refuses a client whose verified chains pass through a CA
// certificate list revokes: a revocation list of the root naming a
// compromised intermediate shuts out what it signed, as etcd's CRL
// flags do (etcd checks every certificate the client presents). Only
// the leaf was checked, which that list never names.
func revokedCA(chains [][]*x509.Certificate, list *crl) error {
	for _, chain := range chains {
		for _, c := range chain[1:] {
			if list.revokes(c) {
				return fmt.Errorf("tlsfiles: client certificate is signed by CA %q, serial %s, which is revoked", c.Subject.CommonName, c.SerialNumber)
			}
		}
	}
	return nil
}

// ClientConfig returns the config of one dialer's handshake to
// serverName (a host name or an IP address), built from what the Source
// holds now: its client certificate, and its trust to verify the server.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	st := s.current()
	c := &tls.Config{ServerName: serverName, RootCAs: st.pool, InsecureSkipVerify: s.skipVerify}
	if s.serverName != "" {
		c.ServerName = s.serverName
	}
	s.suite.Apply(c)
	if st.clientCert != nil {
		c.Certificates = []tls.Certificate{*st.clientCert}
	}
	return c
}
