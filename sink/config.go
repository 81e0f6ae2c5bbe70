package sink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"chute/internal/tlsfiles"

	"chute/internal/setting"
)

// Config is where a node sends the rows of its ClickHouse queues and how
// it verifies that ClickHouse. Callers read it at every batch (see
// ParseURL and TLSConfig); it reads no flags or environment.
type Config struct {
	// URL is ClickHouse's HTTP interface, as ParseURL reads it, or a
	// comma-separated list of such URLs, as ParseURLs reads it: batches
	// go round-robin over the servers that are up (Servers). It may hold
	// passwords: never log it whole. Empty: no ClickHouse, and
	// ClickHouse queues keep their rows.
	URL string

	// Settings are ClickHouse settings sent with every INSERT, as
	// ParseSettingsText reads them ("name=value,name=value"); a queue's
	// own settings override them by name. Empty: none.
	Settings string

	// Compression compresses INSERT bodies, as ParseCompression reads it:
	// auto, none, gzip, deflate, zstd or lz4. Empty: none.
	Compression string

	// Database is the database of tables named without one. Default
	// DefaultDatabase. Empty is invalid.
	Database string

	// CAFile is a PEM bundle of the CAs that verify ClickHouse's
	// certificate on an https URL. Empty: the system's roots.
	CAFile string

	// CertFile and KeyFile are the PEM client certificate and key shown
	// to ClickHouse over https, both or neither. Empty: none.
	CertFile, KeyFile string

	// ServerName is the name ClickHouse's certificate must hold, instead
	// of the URL's host. Empty: the URL's host.
	ServerName string

	// Suite is the node's TLS versions and cipher suites, which an https
	// ClickHouse is spoken to with too. Zero: TLS 1.2 at least.
	Suite tlsfiles.Suite
}

// DefaultConfig returns no URL and DefaultDatabase.
func DefaultConfig() Config { return Config{Database: DefaultDatabase} }

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// tlsSet reports whether any TLS setting is given.
func (c Config) tlsSet() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// Validate reports every setting that cannot work, each a *FieldError,
// joined: the URLs as ParseURLs reads them (port 0 is refused: every
// batch would fail), settings and compression that do not parse, an
// empty Database, TLS settings without an https URL in the list, and
// TLS files that cannot be read, a certificate without its key included.
// It reads the TLS files.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Pkg: "sink", Field: field, Err: err}) }
	https := false
	if c.URL != "" {
		eps, err := ParseURLs(c.URL)
		if err != nil {
			bad("URL", err)
		}
		for _, ep := range eps {
			https = https || ep.TLS
		}
	}
	if _, err := ParseSettingsText(c.Settings); err != nil {
		bad("Settings", err)
	}
	if _, err := ParseCompression(c.Compression); err != nil {
		bad("Compression", err)
	}
	if c.Database == "" {
		bad("Database", errors.New("must not be empty"))
	}
	if !c.tlsSet() {
		return errors.Join(errs...)
	}
	if !https {
		for _, o := range []struct{ field, value string }{
			{"CAFile", c.CAFile}, {"CertFile", c.CertFile}, {"KeyFile", c.KeyFile}, {"ServerName", c.ServerName},
		} {
			if o.value != "" {
				errs = append(errs, &FieldError{Pkg: "sink", Field: o.field, Needs: "URL", Err: errors.New("needs an https:// URL")})
			}
		}
	}
	if _, err := c.TLSConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TLSConfig reads the TLS files and returns the configuration an https
// ClickHouse is verified with: RootCAs from CAFile (nil, the system's
// roots, without one), the client certificate, ServerName, Suite's
// versions and cipher suites (TLS 1.2 at least). It returns nil when no
// TLS setting is given. Its errors are
// *FieldErrors, one per file at fault, holding paths but never the URL.
// Call it at start and at every reload, so renewed files take effect
// without a restart.
func (c Config) TLSConfig() (*tls.Config, error) {
	if !c.tlsSet() && c.Suite.IsZero() {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: c.ServerName}
	c.Suite.Apply(cfg)
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Pkg: "sink", Field: field, Err: err}) }
	if c.CAFile != "" {
		pool, err := tlsfiles.LoadCA(c.CAFile)
		if err != nil {
			bad("CAFile", err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		errs = append(errs, &FieldError{Pkg: "sink", Field: "CertFile", Needs: "KeyFile", Err: errors.New("needs a key file")})
	case c.CertFile == "" && c.KeyFile != "":
		errs = append(errs, &FieldError{Pkg: "sink", Field: "KeyFile", Needs: "CertFile", Err: errors.New("needs a certificate file")})
	case c.CertFile != "":
		certPEM, err := os.ReadFile(c.CertFile)
		if err != nil {
			bad("CertFile", err)
			break
		}
		keyPEM, err := os.ReadFile(c.KeyFile)
		if err != nil {
			bad("KeyFile", err)
			break
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			bad("CertFile", fmt.Errorf("%s and %s: %w", c.CertFile, c.KeyFile, err))
			break
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}
