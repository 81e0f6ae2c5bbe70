package main

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"time"

	"chute/internal/tlsfiles"
)

// validateTLS reports, through bad, every TLS setting that is missing what
// it needs or would have no effect. A security flag is never ignored: what
// cannot be honoured is an error naming it.
func (c Config) validateTLS(bad func(flagName, format string, args ...any)) {
	suite, err := c.tlsSuite()
	if err != nil {
		var fe flagError
		if errors.As(err, &fe) {
			bad(fe.flag, "%v", fe.err)
		}
	}
	if suite.MinVersion == tls.VersionTLS13 && len(suite.CipherSuites) > 0 {
		bad("cipher-suites", "TLS 1.3 suites are not configurable; drop it or lower --tls-min-version")
	}
	if c.SelfSignedCertValidity <= 0 {
		bad("self-signed-cert-validity", "%d is not a positive number of years", c.SelfSignedCertValidity)
	}

	// The etcd API.
	ct := c.ClientTLS
	httpsClient := slices.ContainsFunc(c.ListenClientURLs, isHTTPS)
	checkPair(bad, "cert-file", "key-file", ct.CertFile, ct.KeyFile)
	hasCert := ct.CertFile != "" && ct.KeyFile != ""
	switch {
	case c.AutoTLS && (ct.CertFile != "" || ct.KeyFile != ""):
		bad("auto-tls", "--cert-file/--key-file are given too; use one")
	case httpsClient && !hasCert && !c.AutoTLS:
		bad("listen-client-urls", "https:// needs --cert-file and --key-file, or --auto-tls")
	}
	if !httpsClient {
		for _, f := range []struct {
			name  string
			given bool
		}{
			{"cert-file", ct.CertFile != ""}, {"key-file", ct.KeyFile != ""}, {"auto-tls", c.AutoTLS},
			{"client-cert-auth", ct.ClientCertAuth}, {"trusted-ca-file", ct.TrustedCAFile != ""},
			{"client-crl-file", ct.CRLFile != ""}, {"client-cert-allowed-hostname", ct.AllowedHostname != ""},
		} {
			if f.given {
				bad(f.name, "no https:// URL in --listen-client-urls to apply it to")
			}
		}
	}
	checkTrust(bad, "", ct, "client-crl-file", "client-cert-allowed-hostname", "", c.AutoTLS)

	// The peer link: one listener configuration for every peer URL.
	pt := c.PeerTLS
	httpsPeer := slices.ContainsFunc(c.ListenPeerURLs, isHTTPS)
	if httpsPeer && slices.ContainsFunc(c.ListenPeerURLs, func(u string) bool { return !isHTTPS(u) }) {
		bad("listen-peer-urls", "mixes http:// and https://; the peer link is TLS on every URL or on none")
	}
	checkPair(bad, "peer-cert-file", "peer-key-file", pt.CertFile, pt.KeyFile)
	checkPair(bad, "peer-client-cert-file", "peer-client-key-file", pt.ClientCertFile, pt.ClientKeyFile)
	peerCert := pt.CertFile != "" || pt.KeyFile != ""
	switch {
	case c.PeerAutoTLS && peerCert:
		bad("peer-auto-tls", "--peer-cert-file/--peer-key-file are given too; use one")
	case (peerCert || c.PeerAutoTLS) && !httpsPeer:
		name := "peer-cert-file"
		if c.PeerAutoTLS {
			name = "peer-auto-tls"
		}
		bad(name, "--listen-peer-urls must be https://")
	case httpsPeer && !peerCert && !c.PeerAutoTLS && c.GossipKey == "":
		bad("listen-peer-urls", "https:// needs --peer-cert-file and --peer-key-file, --peer-auto-tls or --gossip-key")
	}
	if (pt.ClientCertFile != "" || pt.ClientKeyFile != "") && !peerCert {
		bad("peer-client-cert-file", "needs --peer-cert-file and --peer-key-file")
	}
	if pt.TrustedCAFile != "" && !peerCert {
		bad("peer-trusted-ca-file", "needs --peer-cert-file and --peer-key-file")
	}
	checkTrust(bad, "peer-", pt, "peer-crl-file", "peer-cert-allowed-hostname", "peer-cert-allowed-cn", c.PeerAutoTLS)

	// The metrics listener.
	checkPair(bad, "metrics-cert-file", "metrics-key-file", c.MetricsCertFile, c.MetricsKeyFile)
	if (c.MetricsCertFile != "" || c.MetricsKeyFile != "") && c.MetricsListen == "" {
		bad("metrics-cert-file", "needs --metrics-listen")
	}
}

// checkTrust checks the client-verification flags of one listener: the
// prefix is "" or "peer-", the other names are those of its CRL, allowed
// host name and allowed CN flags ("" when it has none).
func checkTrust(bad func(string, string, ...any), prefix string, f tlsfiles.Files, crlFlag, hostFlag, cnFlag string, auto bool) {
	if f.TrustedCAFile != "" {
		if err := tlsfiles.CheckCA(f.TrustedCAFile); err != nil {
			bad(prefix+"trusted-ca-file", "%v", err)
		}
	}
	if f.ClientCertAuth {
		switch {
		case auto:
			bad(prefix+"client-cert-auth", "cannot verify self-signed certificates: use --%scert-file with --%strusted-ca-file", prefix, prefix)
		case f.TrustedCAFile == "":
			bad(prefix+"client-cert-auth", "needs --%strusted-ca-file", prefix)
		}
	}
	needsAuth := func(name, value string) {
		if name != "" && value != "" && !f.ClientCertAuth {
			bad(name, "needs --%sclient-cert-auth", prefix)
		}
	}
	needsAuth(crlFlag, f.CRLFile)
	needsAuth(hostFlag, f.AllowedHostname)
	needsAuth(cnFlag, f.AllowedCN)
	if f.CRLFile != "" {
		if err := tlsfiles.CheckCRL(f.CRLFile); err != nil {
			bad(crlFlag, "%v", err)
		}
	}
}

// checkPair checks a certificate and its key: both or neither, readable,
// matching.
func checkPair(bad func(string, string, ...any), certFlag, keyFlag, cert, key string) {
	switch {
	case cert == "" && key == "":
	case cert == "":
		bad(keyFlag, "needs --%s", certFlag)
	case key == "":
		bad(certFlag, "needs --%s", keyFlag)
	default:
		if err := tlsfiles.CheckKeyPair(cert, key); err != nil {
			bad(certFlag, "%v", err)
		}
	}
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

// tlsSuite returns the versions and cipher suites every TLS endpoint uses.
func (c Config) tlsSuite() (tlsfiles.Suite, error) {
	var s tlsfiles.Suite
	var err error
	if s.MinVersion, err = tlsfiles.ParseVersion(c.TLSMinVersion); err != nil {
		return s, flagError{"tls-min-version", err}
	}
	if s.MaxVersion, err = tlsfiles.ParseVersion(c.TLSMaxVersion); err != nil {
		return s, flagError{"tls-max-version", err}
	}
	if s.MaxVersion != 0 && s.MinVersion > s.MaxVersion {
		return s, flagError{"tls-max-version", errors.New("is below --tls-min-version")}
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
		if t.client, err = tlsfiles.SelfSigned(urlHosts(c.ListenClientURLs, c.AdvertiseClientURLs), validity, suite); err != nil {
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
