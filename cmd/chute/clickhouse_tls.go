package main

import (
	"crypto/tls"
	"errors"
)

// clickhouseTLS reads the ClickHouse TLS files of c (see sink.Config's
// TLSConfig) and returns the configuration the sink verifies an https
// ClickHouse with; nil when no TLS option is set. Its errors name the
// flag at fault, one each, and hold file paths but never the URL. Called
// at start and at every reload, so renewed files take effect without a
// restart.
func (c Config) clickhouseTLS() (*tls.Config, error) {
	cfg, err := c.sinkConfig().TLSConfig()
	if err != nil {
		return nil, errors.Join(nameFlags(err, sinkFlags())...)
	}
	return cfg, nil
}
