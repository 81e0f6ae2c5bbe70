package main

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"chute/internal/testcerts"
)

// tlsFixture is a CA and files signed by it, in one temp dir.
type tlsFixture struct {
	dir, ca, cert, key, cert2, key2, crl string
}

func newTLSFixture(t *testing.T) tlsFixture {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	f := tlsFixture{dir: dir, ca: ca.WriteCA(t, dir, "ca")}
	f.cert, f.key = ca.Issue(t, "node", "127.0.0.1").Write(t, dir, "node")
	f.cert2, f.key2 = ca.Issue(t, "client", "127.0.0.1").Write(t, dir, "client")
	f.crl = ca.WriteCRL(t, dir, "crl")
	return f
}

// tlsOptions sets every TLS option at once, consistently: they need each
// other (a certificate needs an https:// URL, client-cert-auth a CA).
func tlsOptions(t *testing.T) []optionCase {
	f := newTLSFixture(t)
	return []optionCase{
		{"listen-client-urls", "https://127.0.0.1:1", func(c *Config) {
			c.ListenClientURLs = []string{"https://127.0.0.1:1"}
			c.AdvertiseClientURLs = c.ListenClientURLs
		}, nil},
		{"listen-peer-urls", "https://127.0.0.1:2", func(c *Config) {
			c.ListenPeerURLs = []string{"https://127.0.0.1:2"}
			c.AdvertisePeerURLs = c.ListenPeerURLs
		}, nil},
		{"cert-file", f.cert, func(c *Config) { c.ClientTLS.CertFile = f.cert }, nil},
		{"key-file", f.key, func(c *Config) { c.ClientTLS.KeyFile = f.key }, nil},
		{"client-cert-auth", "true", func(c *Config) { c.ClientTLS.ClientCertAuth = true }, nil},
		{"trusted-ca-file", f.ca, func(c *Config) { c.ClientTLS.TrustedCAFile = f.ca }, nil},
		{"client-crl-file", f.crl, func(c *Config) { c.ClientTLS.CRLFile = f.crl }, nil},
		{"client-cert-allowed-hostname", "app.example", func(c *Config) { c.ClientTLS.AllowedHostname = "app.example" }, nil},
		{"peer-cert-file", f.cert, func(c *Config) { c.PeerTLS.CertFile = f.cert }, nil},
		{"peer-key-file", f.key, func(c *Config) { c.PeerTLS.KeyFile = f.key }, nil},
		{"peer-client-cert-auth", "true", func(c *Config) { c.PeerTLS.ClientCertAuth = true }, nil},
		{"peer-trusted-ca-file", f.ca, func(c *Config) { c.PeerTLS.TrustedCAFile = f.ca }, nil},
		{"peer-crl-file", f.crl, func(c *Config) { c.PeerTLS.CRLFile = f.crl }, nil},
		{"peer-cert-allowed-cn", "node", func(c *Config) { c.PeerTLS.AllowedCN = "node" }, nil},
		{"peer-cert-allowed-hostname", "127.0.0.1", func(c *Config) { c.PeerTLS.AllowedHostname = "127.0.0.1" }, nil},
		{"peer-client-cert-file", f.cert2, func(c *Config) { c.PeerTLS.ClientCertFile = f.cert2 }, nil},
		{"peer-client-key-file", f.key2, func(c *Config) { c.PeerTLS.ClientKeyFile = f.key2 }, nil},
		{"self-signed-cert-validity", "3", func(c *Config) { c.SelfSignedCertValidity = 3 }, nil},
		{"tls-min-version", "TLS1.2", func(c *Config) { c.TLSMinVersion = "TLS1.2" }, nil},
		{"tls-max-version", "TLS1.3", func(c *Config) { c.TLSMaxVersion = "TLS1.3" }, nil},
		{"cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", func(c *Config) {
			c.CipherSuites = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
		}, nil},
		{"metrics-cert-file", f.cert, func(c *Config) { c.MetricsCertFile = f.cert }, nil},
		{"metrics-key-file", f.key, func(c *Config) { c.MetricsKeyFile = f.key }, nil},
		// The two generated modes cannot go with the files above; each
		// is loaded on its own in TestLoadConfig_autoTLS.
		{"auto-tls", "true", nil, nil},
		{"peer-auto-tls", "true", nil, nil},
	}
}

func TestLoadConfig_tlsOptions(t *testing.T) {
	opts := slices.DeleteFunc(tlsOptions(t), func(o optionCase) bool { return o.want == nil })
	want := DefaultConfig()
	for _, o := range opts {
		o.want(&want)
	}
	want.fillAdvertise()
	var args []string
	env := map[string]string{}
	var file strings.Builder
	for _, o := range opts {
		args = append(args, "--"+o.name+"="+o.value)
		env[option{name: o.name}.envVar()] = o.value
		file.WriteString(option{name: o.name}.yamlKey() + ": " + strconv.Quote(o.value) + "\n")
	}
	p := writeConfig(t, file.String())
	for name, load := range map[string]func() (Config, []string){
		"flags": func() (Config, []string) { return mustLoad(t, args, nil) },
		"env":   func() (Config, []string) { return mustLoad(t, nil, env) },
		"file":  func() (Config, []string) { return mustLoad(t, []string{"--config", p}, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := load()
			w := want
			if name == "file" {
				w.ConfigFile = p
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("got %+v,\nwant %+v", got, w)
			}
		})
	}
}

func TestLoadConfig_autoTLS(t *testing.T) {
	got, _ := mustLoad(t, []string{"--listen-client-urls", "https://127.0.0.1:1", "--auto-tls",
		"--listen-peer-urls", "https://127.0.0.1:2", "--peer-auto-tls"}, nil)
	if !got.AutoTLS || !got.PeerAutoTLS {
		t.Fatalf("got AutoTLS %v, PeerAutoTLS %v; want both", got.AutoTLS, got.PeerAutoTLS)
	}
	// A gossip key alone secures https:// peer URLs (derived certificates).
	if _, _, err := loadConfig([]string{"--listen-peer-urls", "https://127.0.0.1:2", "--gossip-key", key(32)}, envOf(nil)); err != nil {
		t.Fatalf("https peer URLs with a gossip key: %v", err)
	}
}

// TestRun_securityFlagsFailClosed gives each etcd security flag without
// what it needs, and https:// URLs without certificates: every one exits 2
// with a message naming the flag. Walking the list, it also checks that no
// security flag is among those ignored with a warning.
func TestRun_securityFlagsFailClosed(t *testing.T) {
	f := newTLSFixture(t)
	https, peerHTTPS := "--listen-client-urls=https://127.0.0.1:1", "--listen-peer-urls=https://127.0.0.1:2"
	peerCerts := []string{peerHTTPS, "--peer-cert-file", f.cert, "--peer-key-file", f.key}
	cases := []struct {
		flag string // the flag the message must name
		args []string
	}{
		{"listen-client-urls", []string{https}},
		{"listen-peer-urls", []string{peerHTTPS}},
		{"listen-peer-urls", []string{"--listen-peer-urls=https://127.0.0.1:2,http://127.0.0.1:3", "--peer-auto-tls"}},
		{"cert-file", []string{"--cert-file", f.cert, "--key-file", f.key}},
		{"cert-file", []string{https, "--cert-file", f.cert}},
		{"cert-file", []string{https, "--cert-file", f.ca, "--key-file", f.key}},
		{"key-file", []string{https, "--key-file", f.key}},
		{"client-cert-auth", []string{https, "--auto-tls", "--client-cert-auth"}},
		{"client-cert-auth", []string{https, "--cert-file", f.cert, "--key-file", f.key, "--client-cert-auth"}},
		{"client-crl-file", []string{https, "--cert-file", f.cert, "--key-file", f.key, "--client-crl-file", f.crl}},
		{"client-crl-file", []string{https, "--cert-file", f.cert, "--key-file", f.key, "--client-cert-auth", "--trusted-ca-file", f.ca, "--client-crl-file", f.ca}},
		{"client-cert-allowed-hostname", []string{https, "--auto-tls", "--client-cert-allowed-hostname", "x"}},
		{"trusted-ca-file", []string{"--trusted-ca-file", f.ca}},
		{"trusted-ca-file", []string{https, "--auto-tls", "--trusted-ca-file", f.key}},
		{"auto-tls", []string{"--auto-tls"}},
		{"auto-tls", []string{https, "--auto-tls", "--cert-file", f.cert, "--key-file", f.key}},
		{"peer-cert-file", []string{"--peer-cert-file", f.cert, "--peer-key-file", f.key}},
		{"peer-cert-file", []string{peerHTTPS, "--peer-cert-file", f.cert}},
		{"peer-key-file", []string{peerHTTPS, "--peer-key-file", f.key}},
		{"peer-client-cert-auth", append(slices.Clone(peerCerts), "--peer-client-cert-auth")},
		{"peer-client-cert-auth", []string{peerHTTPS, "--peer-auto-tls", "--peer-client-cert-auth"}},
		{"peer-trusted-ca-file", []string{peerHTTPS, "--peer-auto-tls", "--peer-trusted-ca-file", f.ca}},
		{"peer-cert-allowed-cn", append(slices.Clone(peerCerts), "--peer-cert-allowed-cn", "node")},
		{"peer-cert-allowed-hostname", append(slices.Clone(peerCerts), "--peer-cert-allowed-hostname", "node")},
		{"peer-auto-tls", []string{"--peer-auto-tls"}},
		{"peer-auto-tls", append(slices.Clone(peerCerts), "--peer-auto-tls")},
		{"peer-client-cert-file", []string{peerHTTPS, "--peer-auto-tls", "--peer-client-cert-file", f.cert2, "--peer-client-key-file", f.key2}},
		{"peer-client-key-file", append(slices.Clone(peerCerts), "--peer-client-key-file", f.key2)},
		{"peer-crl-file", append(slices.Clone(peerCerts), "--peer-crl-file", f.crl)},
		{"self-signed-cert-validity", []string{"--self-signed-cert-validity", "0"}},
		{"cipher-suites", []string{"--cipher-suites", "TLS_RSA_WITH_RC4_128_SHA"}},
		{"cipher-suites", []string{"--tls-min-version", "TLS1.3", "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
		{"tls-min-version", []string{"--tls-min-version", "TLS1.0"}},
		{"tls-max-version", []string{"--tls-max-version", "TLS1.4"}},
		{"tls-max-version", []string{"--tls-min-version", "TLS1.3", "--tls-max-version", "TLS1.2"}},
		{"metrics-cert-file", []string{"--metrics-cert-file", f.cert}},
		{"metrics-cert-file", []string{"--metrics-listen=", "--metrics-cert-file", f.cert, "--metrics-key-file", f.key}},
		{"metrics-key-file", []string{"--metrics-key-file", f.key}},
		{"listen-metrics-urls", []string{"--listen-metrics-urls", "https://127.0.0.1:2381"}},
		{"cors", []string{"--cors", "*"}},
		{"host-whitelist", []string{"--host-whitelist", "*"}},
		{"client-cert-file", []string{"--client-cert-file", f.cert}},
		{"client-key-file", []string{"--client-key-file", f.key}},
		{"config-file", []string{"--config-file", f.ca}},
		{"auth-token", []string{"--auth-token", "jwt,pub-key=a.pem,priv-key=a.key,sign-method=RS256"}},
		{"auth-token", []string{"--auth-token", "plain"}},
		{"bcrypt-cost", []string{"--bcrypt-cost", "3"}},
		{"bcrypt-cost", []string{"--bcrypt-cost", "0"}},
		{"auth-token-ttl", []string{"--auth-token-ttl", "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"--name", "n1"}, tc.args...)
			if code := run(args, envOf(nil), &stdout, &stderr); code != exitUsage {
				t.Fatalf("run(%q): exit %d, want %d (stderr %q)", args, code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), "-"+tc.flag+":") && !strings.Contains(stderr.String(), "flag -"+tc.flag) {
				t.Fatalf("run(%q): stderr %q does not name --%s", args, stderr.String(), tc.flag)
			}
		})
	}

	var c Config
	ignored := etcdFlags()
	for _, name := range etcdSecurityFlags {
		if slices.ContainsFunc(ignored, func(e etcdFlag) bool { return e.name == name }) {
			t.Errorf("--%s is ignored with a warning; a security flag must be honoured or refused", name)
		}
		honoured := slices.ContainsFunc(options(&c), func(o option) bool { return o.name == name })
		refused := slices.ContainsFunc(refusedEtcdFlags(), func(r refusedFlag) bool { return r.name == name })
		if honoured == refused {
			t.Errorf("--%s: honoured %v, refused %v; want exactly one", name, honoured, refused)
		}
		if !slices.ContainsFunc(cases, func(c struct {
			flag string
			args []string
		}) bool {
			return c.flag == name
		}) {
			t.Errorf("--%s has no fail-closed case", name)
		}
	}
}
