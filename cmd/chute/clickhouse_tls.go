package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"chute/internal/tlsfiles"
)

// clickhouseTLSSet reports whether any of the ClickHouse TLS options is
// set.
func (c Config) clickhouseTLSSet() bool {
	return c.ClickHouseCAFile != "" || c.ClickHouseCertFile != "" || c.ClickHouseKeyFile != "" || c.ClickHouseServerName != ""
}

// clickhouseTLS reads the ClickHouse TLS files of c and returns the
// configuration the sink verifies an https ClickHouse with: RootCAs from
// the CA file (nil, the system's roots, without one), the client
// certificate, the server name, TLS 1.2 at least. It returns nil when no
// TLS option is set. Its errors name the flag at fault, one each, and hold
// file paths but never the URL. Called at start and at every reload, so
// renewed files take effect without a restart.
func (c Config) clickhouseTLS() (*tls.Config, error) {
	if !c.clickhouseTLSSet() {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: c.ClickHouseServerName, MinVersion: tls.VersionTLS12}
	var errs []error
	if c.ClickHouseCAFile != "" {
		pool, err := tlsfiles.LoadCA(c.ClickHouseCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--clickhouse-ca-file: %w", err))
		}
		cfg.RootCAs = pool
	}
	switch cert, key := c.ClickHouseCertFile, c.ClickHouseKeyFile; {
	case cert != "" && key == "":
		errs = append(errs, errors.New("--clickhouse-cert-file: needs --clickhouse-key-file"))
	case cert == "" && key != "":
		errs = append(errs, errors.New("--clickhouse-key-file: needs --clickhouse-cert-file"))
	case cert != "":
		pair, err := loadKeyPair(cert, key)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// loadKeyPair reads a client certificate and its key, each error naming
// the flag of the file at fault.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--clickhouse-cert-file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--clickhouse-key-file: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--clickhouse-cert-file, --clickhouse-key-file: %s and %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}
