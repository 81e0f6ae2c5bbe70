package main

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"time"

	"chute/internal/tlsfiles"
)

// validateTLS reports every TLS setting that is missing what it needs or
// would have no effect. A security flag is never ignored: what cannot be
// honoured is an error naming it. tlsfiles owns the rules of each set of
// files and of the suite; validateTLS names their flags and checks what
// only the flags know: which listener the files serve, and what
// --auto-tls and --peer-auto-tls exclude.
func (c Config) validateTLS() []error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: "+format, append([]any{flagName}, args...)...))
	}
	suite, err := c.tlsSuite()
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, nameFlags(suite.Validate(), map[string]flagOf{
			"MaxVersion": {name: "tls-max-version"}, "CipherSuites": {name: "cipher-suites"},
		})...)
	}
	if c.SelfSignedCertValidity <= 0 {
		bad("self-signed-cert-validity", "%d is not a positive number of years", c.SelfSignedCertValidity)
	}

	// The etcd API. kv refuses an https:// URL without a certificate.
	ct := c.ClientTLS
	errs = append(errs, nameFlags(ct.Validate(), map[string]flagOf{
		"CertFile": {name: "cert-file"}, "KeyFile": {name: "key-file"},
		"TrustedCAFile": {name: "trusted-ca-file"}, "ClientCertAuth": {name: "client-cert-auth"},
		"CRLFile": {name: "client-crl-file"}, "AllowedHostname": {name: "client-cert-allowed-hostname"},
	})...)
	if c.AutoTLS && (ct.CertFile != "" || ct.KeyFile != "") {
		bad("auto-tls", "--cert-file/--key-file are given too; use one")
	}
	if c.AutoTLS && ct.ClientCertAuth {
		bad("client-cert-auth", "cannot verify self-signed certificates: use --cert-file with --trusted-ca-file")
	}
	clientCert := ct.CertFile != "" || ct.KeyFile != "" || c.AutoTLS
	if s := slices.IndexFunc(c.ListenMetricsURLs, isHTTPS); s >= 0 && !clientCert {
		bad("listen-metrics-urls", "%q is https: give --cert-file and --key-file, or --auto-tls", c.ListenMetricsURLs[s])
	}
	if !slices.ContainsFunc(c.ListenClientURLs, isHTTPS) && !slices.ContainsFunc(c.ListenClientHTTPURLs, isHTTPS) &&
		!slices.ContainsFunc(c.ListenMetricsURLs, isHTTPS) {
		for _, f := range []struct {
			name  string
			given bool
		}{
			{"cert-file", ct.CertFile != ""}, {"key-file", ct.KeyFile != ""}, {"auto-tls", c.AutoTLS},
			{"client-cert-auth", ct.ClientCertAuth}, {"trusted-ca-file", ct.TrustedCAFile != ""},
			{"client-crl-file", ct.CRLFile != ""}, {"client-cert-allowed-hostname", ct.AllowedHostname != ""},
		} {
			if f.given {
				bad(f.name, "no https:// URL in --listen-client-urls, --listen-client-http-urls or --listen-metrics-urls to apply it to")
			}
		}
	}

	// The peer link: one listener configuration for every peer URL. The
	// peer listener refuses a mix of http:// and https://, and https://
	// without credentials.
	pt := c.PeerTLS
	errs = append(errs, nameFlags(pt.Validate(), map[string]flagOf{
		"CertFile": {name: "peer-cert-file"}, "KeyFile": {name: "peer-key-file"},
		"TrustedCAFile": {name: "peer-trusted-ca-file"}, "ClientCertAuth": {name: "peer-client-cert-auth"},
		"CRLFile": {name: "peer-crl-file"}, "AllowedHostname": {name: "peer-cert-allowed-hostname"},
		"AllowedCN":      {name: "peer-cert-allowed-cn"},
		"ClientCertFile": {name: "peer-client-cert-file"}, "ClientKeyFile": {name: "peer-client-key-file"},
	})...)
	peerCert := pt.CertFile != "" || pt.KeyFile != ""
	switch {
	case c.PeerAutoTLS && peerCert:
		bad("peer-auto-tls", "--peer-cert-file/--peer-key-file are given too; use one")
	case (peerCert || c.PeerAutoTLS) && !slices.ContainsFunc(c.ListenPeerURLs, isHTTPS):
		name := "peer-cert-file"
		if c.PeerAutoTLS {
			name = "peer-auto-tls"
		}
		bad(name, "--listen-peer-urls must be https://")
	}
	if c.PeerAutoTLS && pt.ClientCertAuth {
		bad("peer-client-cert-auth", "cannot verify self-signed certificates: use --peer-cert-file with --peer-trusted-ca-file")
	}
	if (pt.ClientCertFile != "" || pt.ClientKeyFile != "") && !peerCert {
		bad("peer-client-cert-file", "needs --peer-cert-file and --peer-key-file")
	}
	if pt.TrustedCAFile != "" && !peerCert {
		bad("peer-trusted-ca-file", "needs --peer-cert-file and --peer-key-file")
	}

	// The metrics listener.
	metrics := tlsfiles.Files{CertFile: c.MetricsCertFile, KeyFile: c.MetricsKeyFile}
	errs = append(errs, nameFlags(metrics.Validate(), map[string]flagOf{
		"CertFile": {name: "metrics-cert-file"}, "KeyFile": {name: "metrics-key-file"},
	})...)
	if (c.MetricsCertFile != "" || c.MetricsKeyFile != "") && c.MetricsListen == "" {
		bad("metrics-cert-file", "needs --metrics-listen")
	}
	return errs
}

func isHTTPS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https"
}

// flagError is an error of one flag's value.
type flagError struct {
	flag string
	err  error
}

func (e flagError) Error() string { return "--" + e.flag + ": " + e.err.Error() }

// tlsSuite parses the versions and cipher suites every TLS endpoint
// uses; Suite.Validate checks that they go together.
func (c Config) tlsSuite() (tlsfiles.Suite, error) {
	var s tlsfiles.Suite
	var err error
	if s.MinVersion, err = tlsfiles.ParseVersion(c.TLSMinVersion); err != nil {
		return s, flagError{"tls-min-version", err}
	}
	if s.MaxVersion, err = tlsfiles.ParseVersion(c.TLSMaxVersion); err != nil {
		return s, flagError{"tls-max-version", err}
	}
	if s.CipherSuites, err = tlsfiles.ParseCipherSuites(c.CipherSuites); err != nil {
		return s, flagError{"cipher-suites", err}
	}
	return s, nil
}

// tlsSources are the TLS sources of a node's endpoints; nil where the
// endpoint is plain.
type tlsSources struct {
	client, peer, metrics *tlsfiles.Source
}

// newTLSSources builds the sources of a validated configuration, logging
// what protects each port.
func newTLSSources(c Config, log *slog.Logger) (tlsSources, error) {
	var t tlsSources
	suite, err := c.tlsSuite()
	if err != nil {
		return t, err
	}
	validity := time.Duration(c.SelfSignedCertValidity) * 365 * 24 * time.Hour
	switch {
	case c.ClientTLS.CertFile != "":
		if t.client, err = tlsfiles.FromFiles(c.ClientTLS, suite, log); err != nil {
			return t, err
		}
	case c.AutoTLS:
		if t.client, err = tlsfiles.SelfSigned(urlHosts(c.ListenClientURLs, c.ListenClientHTTPURLs, c.AdvertiseClientURLs, c.ListenMetricsURLs), validity, suite); err != nil {
			return t, err
		}
		log.Warn("--auto-tls: serving the etcd API with a self-signed certificate; clients cannot verify this node")
	}

	switch {
	case c.PeerTLS.CertFile != "":
		if t.peer, err = tlsfiles.FromFiles(c.PeerTLS, suite, log); err != nil {
			return t, err
		}
		if !c.PeerTLS.ClientCertAuth {
			log.Warn("peer link: TLS without --peer-client-cert-auth accepts any client; the peer port is open to anyone who can reach it")
		}
	case c.GossipKey != "":
		key, err := base64.StdEncoding.DecodeString(c.GossipKey)
		if err != nil {
			return t, flagError{"gossip-key", err}
		}
		if t.peer, err = tlsfiles.Derived(key, c.Cluster, c.Name, suite); err != nil {
			return t, err
		}
		log.Info("peer link: mutual TLS derived from the gossip key")
	case c.PeerAutoTLS:
		if t.peer, err = tlsfiles.SelfSigned(urlHosts(c.ListenPeerURLs, c.AdvertisePeerURLs), validity, suite); err != nil {
			return t, err
		}
		log.Warn("--peer-auto-tls without --gossip-key: the peer link is encrypted but not authenticated; the peer port is open to anyone who can reach it")
	default:
		log.Warn("peer link: no peer certificates and no --gossip-key; the peer port is open to anyone who can reach it")
	}

	if c.MetricsCertFile != "" {
		files := tlsfiles.Files{CertFile: c.MetricsCertFile, KeyFile: c.MetricsKeyFile}
		if t.metrics, err = tlsfiles.FromFiles(files, suite, log); err != nil {
			return t, err
		}
	}
	return t, nil
}

// reload reads every source's files again (SIGHUP).
func (t tlsSources) reload(log *slog.Logger) {
	for name, s := range map[string]*tlsfiles.Source{"client": t.client, "peer": t.peer, "metrics": t.metrics} {
		if s == nil {
			continue
		}
		if err := s.Reload(); err != nil {
			log.Error("tls files not reloaded; the old ones stay in use", "endpoint", name, "err", err)
		}
	}
}

// urlHosts returns the hosts of the URLs, each once, for a self-signed
// certificate: the listen hosts and those other nodes and clients use.
func urlHosts(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, raw := range l {
			u, err := url.Parse(raw)
			if err != nil {
				continue
			}
			h := u.Hostname()
			if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
				continue
			}
			if h != "" && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	if !slices.Contains(out, "localhost") {
		out = append(out, "localhost")
	}
	return out
}
