package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"chute/internal/testcerts"

	"chute/internal/testutil"
)

// envOf returns a getenv that reads m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes a YAML config file into a temporary directory and
// returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "chute.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantDefaults is what loadConfig returns when nothing is set.
func wantDefaults() Config {
	c := DefaultConfig()
	c.fillAdvertise()
	return c
}

func mustLoad(t *testing.T, args []string, env map[string]string) (Config, []string) {
	t.Helper()
	cfg, ignored, err := loadConfig(args, envOf(env))
	if err != nil {
		t.Fatalf("loadConfig(%q): %v", args, err)
	}
	return cfg, ignored
}

func key(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

func TestDefaultConfig(t *testing.T) {
	host, _ := os.Hostname()
	want := Config{
		Name:              host,
		Cluster:           "chute",
		ListenClientURLs:  []string{"http://127.0.0.1:2379"},
		ListenPeerURLs:    []string{"http://127.0.0.1:2380"},
		GossipListen:      "127.0.0.1:7946",
		ClickHouseDB:      "default",
		MetricsListen:     "127.0.0.1:9379",
		MetricsMaxTables:  1000,
		LogLevel:          slog.LevelInfo,
		MaxRequestBytes:   1572864,
		EnableGRPCGateway: true,
		MaxTxnOps:         128,
		MaxKeyBytes:       1024,
		HistoryRevisions:  100000,
		AuthToken:         "simple",

		MaxConcurrentStreams:  math.MaxUint32,
		GRPCKeepaliveMinTime:  time.Second,
		GRPCKeepaliveInterval: 2 * time.Hour,
		GRPCKeepaliveTimeout:  20 * time.Second,

		BcryptCost:      10,
		AuthTokenTTL:    300,
		GossipProfile:   "lan",
		BootstrapExpect: 1,
		RaftVoters:      3,
		DeadServerGrace: time.Minute,

		SelfSignedCertValidity: 1,
		ClickHouseCompression:  "auto",

		ClickHouseBatchInterval:       50 * time.Millisecond,
		ClickHouseMaxInsertsPerSecond: 2,
		ClickHouseMaxInflightInserts:  2,
		ClickHouseTimeout:             30 * time.Second,
	}
	got := DefaultConfig()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got.Name = "n1" // the host name may be empty on odd machines
	if err := got.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}
}

func TestLoadConfig_defaults(t *testing.T) {
	got, ignored := mustLoad(t, nil, nil)
	want := wantDefaults()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got.AdvertiseClientURLs[0] != "http://127.0.0.1:2379" || got.AdvertisePeerURLs[0] != "http://127.0.0.1:2380" || got.GossipAdvertise != "127.0.0.1:7946" {
		t.Fatalf("got advertise %v %v %q, want the listen defaults", got.AdvertiseClientURLs, got.AdvertisePeerURLs, got.GossipAdvertise)
	}
	if len(ignored) != 0 {
		t.Fatalf("got ignored %q, want none", ignored)
	}
}

// optionCase sets one option to value and says what that does to a Config.
// needs are the environment variables of the other options it cannot go
// without (an https URL for the TLS files), set in every source.
type optionCase struct {
	name  string
	value string
	want  func(c *Config)
	needs map[string]string
}

// tlsFiles writes a CA and a client certificate and key into a temporary
// directory and returns their paths.
func tlsFiles(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	authority := testcerts.NewCA(t, "clickhouse CA")
	cert, key = authority.Issue(t, "chute", "127.0.0.1").Write(t, dir, "client")
	return authority.WriteCA(t, dir, "ca"), cert, key
}

// everyOption sets each of chute's options, except --config, to a value
// other than its default.
func everyOption(t *testing.T) []optionCase {
	caFile, certFile, keyFile := tlsFiles(t)
	const https = "https://ch:8443"
	withURL := func(f func(c *Config)) func(c *Config) {
		return func(c *Config) { c.ClickHouseURL = https; f(c) }
	}
	return []optionCase{
		{"name", "n1", func(c *Config) { c.Name = "n1" }, nil},
		{"cluster", "c1", func(c *Config) { c.Cluster = "c1" }, nil},
		{"listen-client-urls", "http://10.0.0.1:1, http://h:2", func(c *Config) {
			c.ListenClientURLs = []string{"http://10.0.0.1:1", "http://h:2"}
			c.AdvertiseClientURLs = []string{"http://10.0.0.1:1", "http://h:2"}
		}, nil},
		{"listen-client-http-urls", "http://127.0.0.1:2381", func(c *Config) { c.ListenClientHTTPURLs = []string{"http://127.0.0.1:2381"} }, nil},
		{"advertise-client-urls", "http://a:1,http://b:2", func(c *Config) { c.AdvertiseClientURLs = []string{"http://a:1", "http://b:2"} }, nil},
		{"listen-peer-urls", "http://10.0.0.1:3", func(c *Config) {
			c.ListenPeerURLs = []string{"http://10.0.0.1:3"}
			c.AdvertisePeerURLs = []string{"http://10.0.0.1:3"}
		}, nil},
		{"advertise-peer-urls", "https://p:4", func(c *Config) { c.AdvertisePeerURLs = []string{"https://p:4"} }, nil},
		{"gossip-listen", "10.0.0.1:7000", func(c *Config) { c.GossipListen = "10.0.0.1:7000"; c.GossipAdvertise = "10.0.0.1:7000" }, nil},
		{"gossip-advertise", "1.2.3.4:7001", func(c *Config) { c.GossipAdvertise = "1.2.3.4:7001" }, nil},
		{"join", "a:1, b.example:2", func(c *Config) { c.Join = []string{"a:1", "b.example:2"} }, nil},
		{"gossip-key", key(32), func(c *Config) { c.GossipKey = key(32) }, nil},
		{"clickhouse-url", "http://u:p@ch:8123", func(c *Config) { c.ClickHouseURL = "http://u:p@ch:8123" }, nil},
		{"clickhouse-db", "analytics", func(c *Config) { c.ClickHouseDB = "analytics" }, nil},
		{"clickhouse-settings", "input_format_skip_unknown_fields=1,date_time_input_format=best_effort", func(c *Config) {
			c.ClickHouseSettings = "input_format_skip_unknown_fields=1,date_time_input_format=best_effort"
		}, nil},
		{"clickhouse-compression", "zstd", func(c *Config) { c.ClickHouseCompression = "zstd" }, nil},
		{"clickhouse-ca-file", caFile, withURL(func(c *Config) { c.ClickHouseCAFile = caFile }),
			map[string]string{"CHUTE_CLICKHOUSE_URL": https}},
		{"clickhouse-cert-file", certFile, withURL(func(c *Config) { c.ClickHouseCertFile, c.ClickHouseKeyFile = certFile, keyFile }),
			map[string]string{"CHUTE_CLICKHOUSE_URL": https, "CHUTE_CLICKHOUSE_KEY_FILE": keyFile}},
		{"clickhouse-key-file", keyFile, withURL(func(c *Config) { c.ClickHouseCertFile, c.ClickHouseKeyFile = certFile, keyFile }),
			map[string]string{"CHUTE_CLICKHOUSE_URL": https, "CHUTE_CLICKHOUSE_CERT_FILE": certFile}},
		{"clickhouse-server-name", "ch.internal", withURL(func(c *Config) { c.ClickHouseServerName = "ch.internal" }),
			map[string]string{"CHUTE_CLICKHOUSE_URL": https}},
		{"clickhouse-batch-interval", "200ms", func(c *Config) { c.ClickHouseBatchInterval = 200 * time.Millisecond }, nil},
		{"clickhouse-timeout", "2m", func(c *Config) { c.ClickHouseTimeout = 2 * time.Minute }, nil},
		// etcd's --log-level takes panic and fatal too: an etcd command
		// line starts.
		{"log-level", "fatal", func(c *Config) { c.LogLevel = slog.LevelError }, nil},
		{"clickhouse-max-inserts-per-second", "0.5", func(c *Config) { c.ClickHouseMaxInsertsPerSecond = 0.5 }, nil},
		{"clickhouse-max-inflight-inserts", "4", func(c *Config) { c.ClickHouseMaxInflightInserts = 4 }, nil},
		{"metrics-listen", "0.0.0.0:9000", func(c *Config) { c.MetricsListen = "0.0.0.0:9000" }, nil},
		{"listen-metrics-urls", "http://127.0.0.1:2381,http://[::1]:2381", func(c *Config) {
			c.ListenMetricsURLs = []string{"http://127.0.0.1:2381", "http://[::1]:2381"}
		}, nil},
		{"metrics-max-tables", "20", func(c *Config) { c.MetricsMaxTables = 20 }, nil},
		{"clickhouse-allow-tables", "default.*, system.query_log", func(c *Config) {
			c.ClickHouseAllowTables = []string{"default.*", "system.query_log"}
		}, nil},
		{"log-level", "debug", func(c *Config) { c.LogLevel = slog.LevelDebug }, nil},
		{"max-request-bytes", "2097152", func(c *Config) { c.MaxRequestBytes = 2097152 }, nil},
		{"enable-grpc-gateway", "false", func(c *Config) { c.EnableGRPCGateway = false }, nil},
		{"max-txn-ops", "64", func(c *Config) { c.MaxTxnOps = 64 }, nil},
		{"max-key-bytes", "2048", func(c *Config) { c.MaxKeyBytes = 2048 }, nil},
		{"max-concurrent-streams", "100", func(c *Config) { c.MaxConcurrentStreams = 100 }, nil},
		{"grpc-keepalive-min-time", "5s", func(c *Config) { c.GRPCKeepaliveMinTime = 5 * time.Second }, nil},
		{"grpc-keepalive-interval", "1m", func(c *Config) { c.GRPCKeepaliveInterval = time.Minute }, nil},
		{"grpc-keepalive-timeout", "3s", func(c *Config) { c.GRPCKeepaliveTimeout = 3 * time.Second }, nil},
		{"history-revisions", "5000000000", func(c *Config) { c.HistoryRevisions = 5000000000 }, nil},
		{"gossip-profile", "fast", func(c *Config) { c.GossipProfile = "fast" }, nil},
		{"auth-token", "simple", func(c *Config) { c.AuthToken = "simple" }, nil},
		{"bcrypt-cost", "12", func(c *Config) { c.BcryptCost = 12 }, nil},
		{"auth-token-ttl", "60", func(c *Config) { c.AuthTokenTTL = 60 }, nil},
		{"data-dir", "/var/lib/chute", func(c *Config) { c.DataDir = "/var/lib/chute" }, nil},
		{"bootstrap-expect", "3", func(c *Config) { c.BootstrapExpect = 3 }, nil},
		{"raft-voters", "5", func(c *Config) { c.RaftVoters = 5 }, nil},
		{"raft-dead-server-grace", "30s", func(c *Config) { c.DeadServerGrace = 30 * time.Second }, nil},
		{"force-new-cluster", "true", func(c *Config) { c.ForceNewCluster = true }, nil},
		{"unsafe-no-fsync", "true", func(c *Config) { c.UnsafeNoFsync = true }, nil},
		{"quota-backend-bytes", "8589934592", func(c *Config) { c.QuotaBackendBytes = 8589934592 }, nil},
	}
}

func TestLoadConfig_everyOptionIsTested(t *testing.T) {
	var c Config
	for _, o := range options(&c) {
		if o.name == "config" {
			continue // TestLoadConfig_configPath
		}
		if slices.ContainsFunc(tlsOptions(t), func(e optionCase) bool { return e.name == o.name }) {
			continue // TestLoadConfig_tlsOptions: they need each other
		}
		if !slices.ContainsFunc(everyOption(t), func(e optionCase) bool { return e.name == o.name }) {
			t.Errorf("option --%s has no case in everyOption", o.name)
		}
	}
}

func TestLoadConfig_everyOption(t *testing.T) {
	for _, tc := range everyOption(t) {
		want := DefaultConfig()
		tc.want(&want)
		want.fillAdvertise()
		o := option{name: tc.name}
		sources := []struct {
			source string
			args   []string
			env    map[string]string
		}{
			{"flag=value", []string{"--" + tc.name + "=" + tc.value}, nil},
			{"flag value", []string{"--" + tc.name, tc.value}, nil},
			{"-flag value", []string{"-" + tc.name, tc.value}, nil},
			{"bare flag", []string{"--" + tc.name}, nil},
			{"env", nil, map[string]string{o.envVar(): tc.value}},
			{"file", nil, nil},
		}
		for _, s := range sources {
			// A boolean takes its value after "=" only; alone it is true.
			isBool := tc.value == "true" || tc.value == "false"
			if isBool && strings.HasSuffix(s.source, "flag value") || tc.value != "true" && s.source == "bare flag" {
				continue
			}
			t.Run(tc.name+"/"+s.source, func(t *testing.T) {
				args := s.args
				if s.source == "file" {
					p := writeConfig(t, o.yamlKey()+": "+strconv.Quote(tc.value)+"\n")
					args = []string{"--config", p}
					want.ConfigFile = p
				} else {
					want.ConfigFile = ""
				}
				env := maps.Clone(tc.needs)
				if env == nil {
					env = map[string]string{}
				}
				maps.Copy(env, s.env)
				got, _ := mustLoad(t, args, env)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("got %+v, want %+v", got, want)
				}
			})
		}
	}
}

func TestLoadConfig_precedence(t *testing.T) {
	keys := []struct {
		name                 string
		file                 string // a line of YAML
		env, flag            string
		def, fromFile        string
		fromEnv, fromFlagVal string
		get                  func(Config) string
	}{
		{
			name: "cluster", file: "cluster: from-file", env: "from-env", flag: "from-flag",
			def: "chute", fromFile: "from-file", fromEnv: "from-env", fromFlagVal: "from-flag",
			get: func(c Config) string { return c.Cluster },
		},
		{
			name: "join", file: "join: [f1:1, f2:2]", env: "e1:1, e2:2", flag: "c1:1",
			def: "", fromFile: "f1:1|f2:2", fromEnv: "e1:1|e2:2", fromFlagVal: "c1:1",
			get: func(c Config) string { return strings.Join(c.Join, "|") },
		},
		{
			name: "max-txn-ops", file: "max_txn_ops: 7", env: "8", flag: "9",
			def: "128", fromFile: "7", fromEnv: "8", fromFlagVal: "9",
			get: func(c Config) string { return strconv.Itoa(c.MaxTxnOps) },
		},
		{
			name: "log-level", file: "log_level: warn", env: "ERROR", flag: "debug",
			def: "INFO", fromFile: "WARN", fromEnv: "ERROR", fromFlagVal: "DEBUG",
			get: func(c Config) string { return c.LogLevel.String() },
		},
		{
			name: "listen-client-urls", file: "listen_client_urls:\n  - http://f:1\n  - http://f:2", env: "http://e:1", flag: "http://c:1,http://c:2",
			def: "http://127.0.0.1:2379", fromFile: "http://f:1|http://f:2", fromEnv: "http://e:1", fromFlagVal: "http://c:1|http://c:2",
			get: func(c Config) string { return strings.Join(c.ListenClientURLs, "|") },
		},
	}
	for _, k := range keys {
		for mask := range 8 {
			inFile, inEnv, inFlag := mask&1 != 0, mask&2 != 0, mask&4 != 0
			var parts []string
			var args []string
			env := map[string]string{}
			want := k.def
			if inFile {
				parts = append(parts, "file")
				args = append(args, "--config", writeConfig(t, k.file+"\n"))
				want = k.fromFile
			}
			if inEnv {
				parts = append(parts, "env")
				env[option{name: k.name}.envVar()] = k.env
				want = k.fromEnv
			}
			if inFlag {
				parts = append(parts, "flag")
				args = append(args, "--"+k.name, k.flag)
				want = k.fromFlagVal
			}
			t.Run(k.name+"/"+strings.Join(append(parts, "default"), "+"), func(t *testing.T) {
				got, _ := mustLoad(t, args, env)
				if g := k.get(got); g != want {
					t.Fatalf("got %q, want %q", g, want)
				}
			})
		}
	}
}

func TestLoadConfig_precedenceMixed(t *testing.T) {
	p := writeConfig(t, "cluster: file\njoin: f:1\nmax_txn_ops: 7\nmax_key_bytes: 9\n")
	got, _ := mustLoad(t,
		[]string{"--config", p, "--cluster", "flag"},
		map[string]string{"CHUTE_JOIN": "e:1", "CHUTE_CLUSTER": "env"})
	if got.Cluster != "flag" {
		t.Errorf("got cluster %q, want %q", got.Cluster, "flag")
	}
	if !slices.Equal(got.Join, []string{"e:1"}) {
		t.Errorf("got join %q, want %q", got.Join, []string{"e:1"})
	}
	if got.MaxTxnOps != 7 || got.MaxKeyBytes != 9 {
		t.Errorf("got max-txn-ops %d max-key-bytes %d, want 7 and 9", got.MaxTxnOps, got.MaxKeyBytes)
	}
	if got.MaxRequestBytes != 1572864 {
		t.Errorf("got max-request-bytes %d, want the default 1572864", got.MaxRequestBytes)
	}
}

func TestLoadConfig_fileValues(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(c *Config)
	}{
		{"empty file", "", func(c *Config) {}},
		{"comments only", "# nothing\n", func(c *Config) {}},
		{"block list", "join:\n  - a:1\n  - b:2\n", func(c *Config) { c.Join = []string{"a:1", "b:2"} }},
		{"flow list", "join: [a:1, b:2]\n", func(c *Config) { c.Join = []string{"a:1", "b:2"} }},
		{"comma string", "join: a:1,b:2\n", func(c *Config) { c.Join = []string{"a:1", "b:2"} }},
		{"comma string with spaces and empties", "join: ' a:1 , ,b:2, '\n", func(c *Config) { c.Join = []string{"a:1", "b:2"} }},
		{"one-item list", "listen_peer_urls: [http://x:1]\n", func(c *Config) { c.ListenPeerURLs = []string{"http://x:1"} }},
		{"empty list", "join: []\n", func(c *Config) {}},
		{"number", "max_request_bytes: 4096\n", func(c *Config) { c.MaxRequestBytes = 4096 }},
		{"quoted number", "max_request_bytes: \"4096\"\n", func(c *Config) { c.MaxRequestBytes = 4096 }},
		{"int64 number", "history_revisions: 9000000000\n", func(c *Config) { c.HistoryRevisions = 9000000000 }},
		{"zero history", "history_revisions: 0\n", func(c *Config) { c.HistoryRevisions = 0 }},
		{"null is absent", "cluster:\nclickhouse_db: ~\n", func(c *Config) {}},
		{"several keys", "name: n1\ncluster: c1\nlog_level: error\n", func(c *Config) {
			c.Name, c.Cluster, c.LogLevel = "n1", "c1", slog.LevelError
		}},
		{"clickhouse_url list", "clickhouse_url:\n  - http://a:1\n  - http://u:p@b:2\n", func(c *Config) { c.ClickHouseURL = "http://a:1,http://u:p@b:2" }},
		{"clickhouse_url comma string", "clickhouse_url: http://a:1,http://b:2\n", func(c *Config) { c.ClickHouseURL = "http://a:1,http://b:2" }},
		{"clickhouse_settings mapping", "clickhouse_settings:\n  input_format_skip_unknown_fields: true\n  max_insert_threads: 4\n  date_time_input_format: best_effort\n",
			func(c *Config) {
				c.ClickHouseSettings = `{"date_time_input_format":"best_effort","input_format_skip_unknown_fields":"1","max_insert_threads":"4"}`
			}},
		// A value's commas and '=' stay in it (they split it in two when
		// the mapping was written as name=value,...).
		{"clickhouse_settings mapping, commas", "clickhouse_settings:\n  log_comment: \"from chute, node=a\"\n  format_csv_delimiter: \",\"\n",
			func(c *Config) {
				c.ClickHouseSettings = `{"format_csv_delimiter":",","log_comment":"from chute, node=a"}`
			}},
		{"clickhouse_settings string", "clickhouse_settings: a=1,b=2\n", func(c *Config) { c.ClickHouseSettings = "a=1,b=2" }},
		{"clickhouse_compression", "clickhouse_compression: none\n", func(c *Config) { c.ClickHouseCompression = "none" }},
		{"anchor and alias", "listen_client_urls: &u [http://x:1]\nadvertise_client_urls: *u\n", func(c *Config) {
			c.ListenClientURLs = []string{"http://x:1"}
			c.AdvertiseClientURLs = []string{"http://x:1"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.yaml)
			want := DefaultConfig()
			want.ConfigFile = p
			tc.want(&want)
			want.fillAdvertise()
			got, _ := mustLoad(t, []string{"--config=" + p}, nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestLoadConfig_fileErrors(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
	}{
		{"unknown key", "cluster: c\nfrobnicate: 1\n", []string{`unknown key "frobnicate"`, "line 2"}},
		{"kebab-case key", "listen-client-urls: http://x:1\n", []string{`unknown key "listen-client-urls"`, `"listen_client_urls"`}},
		{"upper-case key", "NAME: n\n", []string{`unknown key "NAME"`}},
		{"etcd key", "wal_dir: /x\n", []string{`unknown key "wal_dir"`}},
		{"version key", "version: true\n", []string{`unknown key "version"`}},
		{"config key", "config: other.yaml\n", []string{`"config" is not allowed`}},
		{"mapping value", "join:\n  a: 1\n", []string{"join", "want a scalar or a list"}},
		{"nested settings", "clickhouse_settings:\n  a: [1]\n", []string{"clickhouse_settings", "must be scalars"}},
		{"bad setting in the file", "clickhouse_settings:\n  user: admin\n", []string{"--clickhouse-settings", `"user"`}},
		{"list of mappings", "join:\n  - a: 1\n", []string{"join", "list items must be scalars"}},
		{"top-level list", "- a\n- b\n", []string{"want a mapping"}},
		{"duplicate key", "name: a\nname: b\n", []string{`"name" appears twice`}},
		{"bad YAML", "name: [a\n", []string{"config file"}},
		{"not an int", "max_txn_ops: many\n", []string{"max_txn_ops", `"many" is not an integer`}},
		{"float", "max_txn_ops: 1.5\n", []string{"max_txn_ops", "not an integer"}},
		{"bad log level", "log_level: loud\n", []string{"log_level", `"loud" is not one of`}},
		{"bad URL", "listen_client_urls: [ftp://x:1]\n", []string{"--listen-client-urls", "scheme must be http or https"}},
		// A second document's keys were dropped without a word.
		{"two documents", "name: a\n---\nclient_cert_auth: true\n", []string{"line 2", "second YAML document"}},
		// A list was one value of its items joined: the data dir "a,b".
		{"list for a scalar", "data_dir: [/var/lib/a, /var/lib/b]\n", []string{"line 1", "data_dir", "want a scalar, not a list"}},
		{"list for a name", "name:\n  - a\n  - b\n", []string{"name", "want a scalar, not a list"}},
		{"settings key twice", "clickhouse_settings:\n  a: 1\n  a: 2\n", []string{"clickhouse_settings"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.yaml)
			_, _, err := loadConfig([]string{"--config", p}, envOf(nil))
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "missing.yaml")
		_, _, err := loadConfig([]string{"--config", p}, envOf(nil))
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want an error wrapping os.ErrNotExist", err)
		}
	})
}

func TestLoadConfig_configPath(t *testing.T) {
	fromEnv := writeConfig(t, "cluster: env-file\n")
	fromFlag := writeConfig(t, "cluster: flag-file\n")
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantCluster string
		wantFile    string
	}{
		{"none", nil, nil, "chute", ""},
		{"CHUTE_CONFIG", nil, map[string]string{"CHUTE_CONFIG": fromEnv}, "env-file", fromEnv},
		{"--config", []string{"--config", fromFlag}, nil, "flag-file", fromFlag},
		{"--config beats CHUTE_CONFIG", []string{"--config", fromFlag}, map[string]string{"CHUTE_CONFIG": fromEnv}, "flag-file", fromFlag},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := mustLoad(t, tc.args, tc.env)
			if got.Cluster != tc.wantCluster || got.ConfigFile != tc.wantFile {
				t.Fatalf("got cluster %q file %q, want %q and %q", got.Cluster, got.ConfigFile, tc.wantCluster, tc.wantFile)
			}
		})
	}
}

func TestLoadConfig_advertiseDefaults(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		file       string
		wantClient []string
		wantPeer   []string
		wantGossip string
	}{
		{
			name:       "listen from flags",
			args:       []string{"--listen-client-urls=http://10.0.0.1:1", "--listen-peer-urls=http://10.0.0.1:2", "--gossip-listen=10.0.0.1:3"},
			wantClient: []string{"http://10.0.0.1:1"}, wantPeer: []string{"http://10.0.0.1:2"}, wantGossip: "10.0.0.1:3",
		},
		{
			name:       "listen from file, advertise from env",
			file:       "listen_client_urls: http://10.0.0.1:1\nlisten_peer_urls: http://10.0.0.1:2\ngossip_listen: 10.0.0.1:3\n",
			env:        map[string]string{"CHUTE_ADVERTISE_CLIENT_URLS": "http://pub:1", "CHUTE_GOSSIP_ADVERTISE": "pub:3"},
			wantClient: []string{"http://pub:1"}, wantPeer: []string{"http://10.0.0.1:2"}, wantGossip: "pub:3",
		},
		{
			name:       "advertise from file, listen from flag",
			args:       []string{"--listen-peer-urls", "http://10.0.0.1:2"},
			file:       "advertise_peer_urls: [http://pub:2]\n",
			wantClient: []string{"http://127.0.0.1:2379"}, wantPeer: []string{"http://pub:2"}, wantGossip: "127.0.0.1:7946",
		},
		{
			name:       "explicitly empty advertise means listen",
			args:       []string{"--advertise-client-urls=", "--gossip-advertise="},
			wantClient: []string{"http://127.0.0.1:2379"}, wantPeer: []string{"http://127.0.0.1:2380"}, wantGossip: "127.0.0.1:7946",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(slices.Clone(args), "--config", writeConfig(t, tc.file))
			}
			got, _ := mustLoad(t, args, tc.env)
			if !slices.Equal(got.AdvertiseClientURLs, tc.wantClient) {
				t.Errorf("got advertise-client-urls %q, want %q", got.AdvertiseClientURLs, tc.wantClient)
			}
			if !slices.Equal(got.AdvertisePeerURLs, tc.wantPeer) {
				t.Errorf("got advertise-peer-urls %q, want %q", got.AdvertisePeerURLs, tc.wantPeer)
			}
			if got.GossipAdvertise != tc.wantGossip {
				t.Errorf("got gossip-advertise %q, want %q", got.GossipAdvertise, tc.wantGossip)
			}
		})
	}
}

func TestLoadConfig_invalid(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string
	}{
		{"URL scheme", []string{"--listen-client-urls", "ftp://h:1"}, nil, []string{"--listen-client-urls", "scheme must be http or https"}},
		{"unix URL", []string{"--listen-client-urls", "unix://sock"}, nil, []string{"--listen-client-urls", "scheme"}},
		{"URL without port", []string{"--listen-peer-urls", "http://h"}, nil, []string{"--listen-peer-urls", "want host:port"}},
		{"URL without scheme", []string{"--listen-peer-urls", "127.0.0.1:2380"}, nil, []string{"--listen-peer-urls", "not a URL"}},
		{"URL with path", []string{"--advertise-client-urls", "http://h:1/x"}, nil, []string{"--advertise-client-urls", "path"}},
		{"URL with bad port", []string{"--advertise-peer-urls", "http://h:70000"}, nil, []string{"--advertise-peer-urls", "port"}},
		{"no listen URLs", []string{"--listen-client-urls", " , "}, nil, []string{"--listen-client-urls", "at least one"}},
		{"bad log level flag", []string{"--log-level", "loud"}, nil, []string{"log-level", `"loud" is not one of debug, info, warn, error`}},
		{"numeric log level", []string{"--log-level", "INFO+2"}, nil, []string{"log-level"}},
		{"bad log level env", nil, map[string]string{"CHUTE_LOG_LEVEL": "trace"}, []string{"CHUTE_LOG_LEVEL", `"trace"`}},
		{"gossip key not base64", []string{"--gossip-key", "not base64!"}, nil, []string{"--gossip-key", "not valid base64"}},
		{"gossip key 20 bytes", []string{"--gossip-key", key(20)}, nil, []string{"--gossip-key", "20 bytes"}},
		{"gossip key env", nil, map[string]string{"CHUTE_GOSSIP_KEY": key(8)}, []string{"--gossip-key", "8 bytes"}},
		{"int not a number", []string{"--max-txn-ops", "lots"}, nil, []string{"max-txn-ops", `"lots" is not an integer`}},
		{"int env not a number", nil, map[string]string{"CHUTE_MAX_KEY_BYTES": "1k"}, []string{"CHUTE_MAX_KEY_BYTES", `"1k"`}},
		{"zero max-request-bytes", []string{"--max-request-bytes=0"}, nil, []string{"--max-request-bytes", "not positive"}},
		{"negative max-txn-ops", []string{"--max-txn-ops=-1"}, nil, []string{"--max-txn-ops", "-1 is negative"}},
		{"zero max-key-bytes", []string{"--max-key-bytes=0"}, nil, []string{"--max-key-bytes", "not positive"}},
		{"negative history", []string{"--history-revisions=-1"}, nil, []string{"--history-revisions", "negative"}},
		{"negative quota", []string{"--quota-backend-bytes=-1"}, nil, []string{"--quota-backend-bytes", "negative"}},
		{"empty name", []string{"--name="}, nil, []string{"--name", "must not be empty"}},
		{"empty cluster", []string{"--cluster="}, nil, []string{"--cluster", "must not be empty"}},
		{"empty clickhouse-db", []string{"--clickhouse-db="}, nil, []string{"--clickhouse-db", "must not be empty"}},
		{"empty gossip-listen", []string{"--gossip-listen="}, nil, []string{"--gossip-listen", "must not be empty"}},
		{"bad gossip-listen", []string{"--gossip-listen=7946"}, nil, []string{"--gossip-listen", "host:port"}},
		{"bad join", []string{"--join=a:1,b"}, nil, []string{"--join", `"b"`}},
		{"bad metrics-listen", []string{"--metrics-listen=:x"}, nil, []string{"--metrics-listen"}},
		{"listen-metrics-urls path", []string{"--listen-metrics-urls=http://127.0.0.1:2381/metrics"}, nil, []string{"--listen-metrics-urls", "path"}},
		{"listen-metrics-urls scheme", []string{"--listen-metrics-urls=unix:///x"}, nil, []string{"--listen-metrics-urls", "scheme"}},
		{"clickhouse-url scheme", []string{"--clickhouse-url=tcp://h:9000"}, nil, []string{"--clickhouse-url", "scheme"}},
		{"clickhouse-url list element", []string{"--clickhouse-url=http://a:1,tcp://u:s3cret@h:9000"}, nil, []string{"--clickhouse-url", "scheme", "url 2 of the list"}},
		{"clickhouse-url duplicate", []string{"--clickhouse-url=http://a:1,a:1"}, nil, []string{"--clickhouse-url", "a:1 appears twice"}},
		{"clickhouse-settings name", []string{"--clickhouse-settings=a=1,a&b=1"}, nil, []string{"--clickhouse-settings", `name "a&b"`}},
		{"clickhouse-settings quote", []string{`--clickhouse-settings=a"b=1`}, nil, []string{"--clickhouse-settings", `name "a\"b"`}},
		{"clickhouse-settings reserved", []string{"--clickhouse-settings=query=DROP"}, nil, []string{"--clickhouse-settings", `name "query"`}},
		{"clickhouse-settings control byte", []string{"--clickhouse-settings=a=x\x01"}, nil, []string{"--clickhouse-settings", "control byte"}},
		{"clickhouse-compression", []string{"--clickhouse-compression=brotli"}, nil, []string{"--clickhouse-compression", `"brotli"`, "auto, none, gzip, deflate, zstd or lz4"}},
		{"allow-tables without a dot", []string{"--clickhouse-allow-tables=default.*,events"}, nil, []string{"--clickhouse-allow-tables", `"events"`, "want db.table"}},
		{"allow-tables bad glob", nil, map[string]string{"CHUTE_CLICKHOUSE_ALLOW_TABLES": "default.[a-"}, []string{"--clickhouse-allow-tables", "syntax error in pattern"}},
		{"zero metrics-max-tables", []string{"--metrics-max-tables=0"}, nil, []string{"--metrics-max-tables", "not positive"}},
		{"negative metrics-max-tables", []string{"--metrics-max-tables=-1"}, nil, []string{"--metrics-max-tables"}},
		{"missing value", []string{"--name"}, nil, []string{"name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadConfig(tc.args, envOf(tc.env))
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	valid := DefaultConfig()
	valid.Name = "n1"
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantErr string // "" for valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"filled advertise", func(c *Config) { c.fillAdvertise() }, ""},
		{"https and IPv6", func(c *Config) {
			c.ListenClientURLs = []string{"https://[::1]:2379", "http://localhost:0/"}
			c.AutoTLS = true
		}, ""},
		{"gossip key 16", func(c *Config) { c.GossipKey = key(16) }, ""},
		{"gossip key 24", func(c *Config) { c.GossipKey = key(24) }, ""},
		{"gossip key 32", func(c *Config) { c.GossipKey = key(32) }, ""},
		{"gossip key 31", func(c *Config) { c.GossipKey = key(31) }, "--gossip-key: key is 31 bytes"},
		{"clickhouse without port", func(c *Config) { c.ClickHouseURL = "https://user:pw@ch.example" }, ""},
		{"no metrics listener", func(c *Config) { c.MetricsListen = "" }, ""},
		{"history 0", func(c *Config) { c.HistoryRevisions = 0 }, ""},
		{"gossip profile", func(c *Config) { c.GossipProfile = "wan" }, "gossip-profile"},
		{"log level warn", func(c *Config) { c.LogLevel = slog.LevelWarn }, ""},
		{"log level 2", func(c *Config) { c.LogLevel = 2 }, "--log-level"},
		{"listen URL with user", func(c *Config) { c.ListenClientURLs = []string{"http://u:p@h:1"} }, "must not contain a user"},
		{"empty listen peer", func(c *Config) { c.ListenPeerURLs = nil }, "--listen-peer-urls: at least one URL"},
		{"empty host", func(c *Config) { c.GossipAdvertise = ":7946" }, "--gossip-advertise: advertise address \":7946\": host is empty"},
		{"empty clickhouse host", func(c *Config) { c.ClickHouseURL = "http://:8123" }, "--clickhouse-url: sink: bad clickhouse url: no host"},
		{"max-txn-ops 0", func(c *Config) { c.MaxTxnOps = 0 }, "--max-txn-ops: 0 is not positive"},
		{"max-concurrent-streams 0", func(c *Config) { c.MaxConcurrentStreams = 0 }, "--max-concurrent-streams: 0 is outside 1..4294967295"},
		{"max-concurrent-streams past uint32", func(c *Config) { c.MaxConcurrentStreams = 1 << 32 }, "--max-concurrent-streams: 4294967296 is outside"},
		{"grpc-keepalive-timeout 0", func(c *Config) { c.GRPCKeepaliveTimeout = 0 }, "--grpc-keepalive-timeout: 0s is not positive"},
		{"batch interval 0", func(c *Config) { c.ClickHouseBatchInterval = 0 }, "--clickhouse-batch-interval: 0 is not positive"},
		{"batch interval negative", func(c *Config) { c.ClickHouseBatchInterval = -time.Second }, "--clickhouse-batch-interval: "},
		{"clickhouse timeout 0", func(c *Config) { c.ClickHouseTimeout = 0 }, "--clickhouse-timeout: 0s is not positive"},
		{"inserts per second 0", func(c *Config) { c.ClickHouseMaxInsertsPerSecond = 0 }, "--clickhouse-max-inserts-per-second: 0 is not positive"},
		{"inserts per second too high", func(c *Config) { c.ClickHouseMaxInsertsPerSecond = 1e6 }, "--clickhouse-max-inserts-per-second: "},
		{"inflight inserts 0", func(c *Config) { c.ClickHouseMaxInflightInserts = 0 }, "--clickhouse-max-inflight-inserts: 0 is not positive"},
		{"inflight inserts 17", func(c *Config) { c.ClickHouseMaxInflightInserts = 17 }, "--clickhouse-max-inflight-inserts: "},
		{"advertise client port 0", func(c *Config) { c.AdvertiseClientURLs = []string{"http://10.0.0.1:0"} }, "--advertise-client-urls: \"http://10.0.0.1:0\": port 0"},
		{"advertise peer port 0", func(c *Config) { c.AdvertisePeerURLs = []string{"http://10.0.0.1:0"} }, "--advertise-peer-urls: \"http://10.0.0.1:0\": port 0"},
		{"listen port 0", func(c *Config) {
			c.ListenClientURLs, c.ListenPeerURLs = []string{"http://127.0.0.1:0"}, []string{"http://127.0.0.1:0"}
		}, ""},
		{"clickhouse port 0", func(c *Config) { c.ClickHouseURL = "http://ch:0" }, "--clickhouse-url: "},
		{"gossip listen port 0", func(c *Config) { c.GossipListen = "127.0.0.1:0" }, "--gossip-listen: "},
		{"https client without certificate", func(c *Config) { c.ListenClientURLs = []string{"https://127.0.0.1:2379"} }, "--listen-client-urls: \"https://127.0.0.1:2379\" is https: it needs a certificate: give --cert-file"},
		{"https gateway without certificate", func(c *Config) { c.ListenClientHTTPURLs = []string{"https://127.0.0.1:2381"} }, "--listen-client-http-urls: \"https://127.0.0.1:2381\" is https: it needs a certificate: give --cert-file"},
		{"gateway URLs with the gateway off", func(c *Config) {
			c.ListenClientHTTPURLs = []string{"http://127.0.0.1:2381"}
			c.EnableGRPCGateway = false
		}, "--listen-client-http-urls: they serve the JSON gateway alone, and it is turned off (--enable-grpc-gateway)"},
		{"https peer without certificate", func(c *Config) { c.ListenPeerURLs = []string{"https://127.0.0.1:2380"} }, "--listen-peer-urls: \"https://127.0.0.1:2380\" is https: it needs a certificate: give --peer-cert-file"},
		{"https peer with gossip key", func(c *Config) { c.ListenPeerURLs, c.GossipKey = []string{"https://127.0.0.1:2380"}, key(32) }, ""},
		// ~300 bytes of URL fit serf's 512 bytes of tags beside chute's
		// own, not beside raft's tags published later too.
		{"no room for raft's tags", func(c *Config) {
			c.AdvertiseClientURLs = []string{"http://" + strings.Repeat("h", 280) + ":2379"}
		}, "more than serf's 512"},
		{"room for raft's tags", func(c *Config) {
			c.AdvertiseClientURLs = []string{"http://" + strings.Repeat("h", 200) + ":2379"}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("got nil, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("got %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfig_Validate_reportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Cluster, c.MaxKeyBytes = "", "", 0
	err := c.Validate()
	for _, w := range []string{"--name", "--cluster", "--max-key-bytes"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("got %v, want it to contain %q", err, w)
		}
	}
}

func TestConfig_Validate_hidesSecrets(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		secret string
	}{
		{"clickhouse bad port", func(c *Config) { c.ClickHouseURL = "http://u:s3cret@h:99999" }, "s3cret"},
		{"clickhouse bad scheme", func(c *Config) { c.ClickHouseURL = "ftp://u:s3cret@h:1" }, "s3cret"},
		{"clickhouse port 0", func(c *Config) { c.ClickHouseURL = "http://u:s3cret@h:0" }, "s3cret"},
		{"gossip key short", func(c *Config) { c.GossipKey = "c2VjcmV0a2V5" }, "c2VjcmV0a2V5"},
		{"gossip key not base64", func(c *Config) { c.GossipKey = "s3cret!!" }, "s3cret"},
		{"listen URL with password", func(c *Config) { c.ListenPeerURLs = []string{"http://u:s3cret@h:1"} }, "s3cret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Name = "n1"
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("got nil, want an error")
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("got %q, want it without %q", err, tc.secret)
			}
		})
	}
}

func TestLoadConfig_etcdFlags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantIgnored []string
		wantName    string
	}{
		{"value after space", []string{"--wal-dir", "/x", "--name", "n1"}, []string{"wal-dir"}, "n1"},
		{"value after equals", []string{"--wal-dir=/x", "--name", "n1"}, []string{"wal-dir"}, "n1"},
		{"one dash", []string{"-wal-dir", "/x", "-name", "n1"}, []string{"wal-dir"}, "n1"},
		{"boolean", []string{"--pre-vote", "--name", "n1"}, []string{"pre-vote"}, "n1"},
		{"boolean last", []string{"--name", "n1", "--pre-vote"}, []string{"pre-vote"}, "n1"},
		{"boolean with value", []string{"--pre-vote=false", "--name=n1"}, []string{"pre-vote"}, "n1"},
		{"experimental with equals", []string{"--experimental-foo=1", "--name", "n1"}, []string{"experimental-foo"}, "n1"},
		{"experimental with value", []string{"--experimental-foo", "1", "--name", "n1"}, []string{"experimental-foo"}, "n1"},
		{"experimental as boolean", []string{"--experimental-foo", "--name", "n1"}, []string{"experimental-foo"}, "n1"},
		{"experimental last", []string{"--name", "n1", "--experimental-foo"}, []string{"experimental-foo"}, "n1"},
		{"experimental one dash", []string{"-experimental-foo", "x", "-name", "n1"}, []string{"experimental-foo"}, "n1"},
		{"repeated", []string{"--wal-dir", "/a", "--wal-dir=/b", "--experimental-x=1", "--experimental-x=2", "--name", "n1"}, []string{"experimental-x", "wal-dir"}, "n1"},
		{
			"an etcd command line",
			[]string{
				"--name", "n1", "--wal-dir", "/var/lib/etcd/wal", "--initial-advertise-peer-urls", "http://10.0.0.1:2380",
				"--listen-peer-urls", "http://10.0.0.1:2380", "--listen-client-urls", "http://10.0.0.1:2379,http://127.0.0.1:2379",
				"--advertise-client-urls", "http://10.0.0.1:2379", "--initial-cluster-token", "tok",
				"--initial-cluster", "n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380", "--initial-cluster-state", "new",
				"--auto-compaction-retention=1", "--experimental-initial-corrupt-check", "--enable-pprof",
				"--experimental-watch-progress-notify-interval", "5s", "--quota-backend-bytes=8589934592",
			},
			[]string{
				"auto-compaction-retention", "enable-pprof", "experimental-initial-corrupt-check",
				"experimental-watch-progress-notify-interval", "initial-advertise-peer-urls", "initial-cluster",
				"initial-cluster-state", "initial-cluster-token", "wal-dir",
			},
			"n1",
		},
		{"value looks like an experimental flag", []string{"--name", "--experimental-x"}, nil, "--experimental-x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored := mustLoad(t, tc.args, nil)
			if !slices.Equal(ignored, tc.wantIgnored) {
				t.Errorf("got ignored %q, want %q", ignored, tc.wantIgnored)
			}
			if got.Name != tc.wantName {
				t.Errorf("got name %q, want %q", got.Name, tc.wantName)
			}
		})
	}
}

func TestLoadConfig_everyEtcdFlag(t *testing.T) {
	var c Config
	ours := make(map[string]bool)
	for _, o := range options(&c) {
		ours[o.name] = true
	}
	for _, e := range etcdFlags() {
		if ours[e.name] || e.name == "version" {
			t.Errorf("etcd flag --%s is also one of chute's", e.name)
		}
		forms := [][]string{{"--" + e.name + "=true", "--name", "n1"}}
		if e.isBool {
			forms = append(forms, []string{"--" + e.name, "--name", "n1"})
		} else {
			forms = append(forms, []string{"--" + e.name, "v", "--name", "n1"})
		}
		for _, args := range forms {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				got, ignored := mustLoad(t, args, nil)
				if !slices.Equal(ignored, []string{e.name}) {
					t.Errorf("got ignored %q, want %q", ignored, []string{e.name})
				}
				if got.Name != "n1" {
					t.Errorf("got name %q, want %q", got.Name, "n1")
				}
			})
		}
	}
}

func TestLoadConfig_etcdFlagsOnlyOnCommandLine(t *testing.T) {
	_, ignored := mustLoad(t, nil, map[string]string{"CHUTE_DATA_DIR": "/x", "CHUTE_PRE_VOTE": "true"})
	if len(ignored) != 0 {
		t.Fatalf("got ignored %q, want none", ignored)
	}
}

func TestLoadConfig_unknownFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"two dashes", []string{"--frobnicate"}, "--frobnicate"},
		{"one dash", []string{"-frobnicate"}, "--frobnicate"},
		{"with value", []string{"--frobnicate=1"}, "--frobnicate"},
		{"after good flags", []string{"--name", "n1", "--pre-vote", "--frobnicate", "x"}, "--frobnicate"},
		{"etcd flag chute does not know", []string{"--experimental"}, "--experimental"},
		{"positional argument", []string{"--name", "n1", "extra"}, `unexpected argument "extra"`},
		{"bad boolean", []string{"--pre-vote=maybe"}, "pre-vote"},
		{"bad syntax", []string{"---name", "n1"}, "---name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadConfig(tc.args, envOf(nil))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoadConfig_helpAndVersion(t *testing.T) {
	tests := []struct {
		args []string
		want error
	}{
		{[]string{"-h"}, flag.ErrHelp},
		{[]string{"--help"}, flag.ErrHelp},
		{[]string{"--name", "n1", "-help"}, flag.ErrHelp},
		{[]string{"--version"}, errVersion},
		{[]string{"--name", "n1", "--version"}, errVersion},
	}
	// Neither reads the environment or the file, so neither fails on them.
	env := envOf(map[string]string{"CHUTE_LOG_LEVEL": "loud", "CHUTE_CONFIG": "/nonexistent/chute.yaml"})
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := loadConfig(tc.args, env)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{" a , b ", []string{"a", "b"}},
		{"a,,b,", []string{"a", "b"}},
		{" , ", nil},
	}
	for _, tc := range tests {
		if got := splitList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitList(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRun_help(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{arg}, envOf(nil), &stdout, &stderr); code != 0 {
				t.Fatalf("got exit code %d, want 0 (stderr %q)", code, stderr.String())
			}
			out := stdout.String()
			cfg := DefaultConfig()
			var v bool
			var ign ignoredFlags
			fs, opts := newFlagSet(&cfg, &v, &ign)
			for _, o := range opts {
				if !strings.Contains(out, "\n  --"+o.name+" ") && !strings.Contains(out, "\n  --"+o.name+"\n") {
					t.Errorf("help does not list --%s", o.name)
				}
				def := fs.Lookup(o.name).DefValue
				if o.def != "" {
					def = o.def
				}
				if def != "" && !strings.Contains(out, "(default: "+def) {
					t.Errorf("help does not give the default %q of --%s", def, o.name)
				}
			}
			for _, want := range []string{"--version", "--help", "(default: 128)", "(default: 1572864)", "(default: info)", "accepted for etcd compatibility, ignored", "--" + etcdExperimentalPrefix + "*"} {
				if !strings.Contains(out, want) {
					t.Errorf("help does not contain %q", want)
				}
			}
			for _, e := range etcdFlags() {
				if !strings.Contains(out, " --"+e.name+" ") && !strings.Contains(out, " --"+e.name+"\n") {
					t.Errorf("help does not list etcd flag --%s", e.name)
				}
			}
		})
	}
}

func TestRun_version(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, envOf(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("got exit code %d, want 0", code)
	}
	if got, want := stdout.String(), "chute "+version+"\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if version != "0.1.0-dev" {
		t.Fatalf("got version %q, want %q", version, "0.1.0-dev")
	}
}

func TestRun_usageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStderr string
	}{
		{"unknown flag", []string{"--frobnicate"}, nil, "--frobnicate"},
		{"bad value", []string{"--max-txn-ops=x"}, nil, "max-txn-ops"},
		{"bad env", nil, map[string]string{"CHUTE_LISTEN_CLIENT_URLS": "nope"}, "--listen-client-urls"},
		{"missing config file", []string{"--config=/nonexistent/chute.yaml"}, nil, "config file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, envOf(tc.env), &stdout, &stderr); code != 2 {
				t.Fatalf("got exit code %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) || !strings.Contains(stderr.String(), "chute --help") {
				t.Fatalf("got stderr %q, want it to contain %q and a pointer to --help", stderr.String(), tc.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Fatalf("got stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// freeGossipAddr is a loopback address free for TCP and UDP, for a node
// that must not take the default gossip port 7946 from whatever holds it.
func freeGossipAddr(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePortOn(t, "127.0.0.1", true)))
}

func TestRun_signalShutsDownCleanly(t *testing.T) {
	var stdout, stderr testutil.Buffer
	args := []string{
		"--name", "run-test", "--log-level", "warn", "--metrics-listen=",
		"--listen-client-urls", "http://127.0.0.1:0", "--listen-peer-urls", "http://127.0.0.1:0",
		"--gossip-listen", freeGossipAddr(t),
		"--data-dir", t.TempDir(), "--wal-dir", "/x", "--wal-dir=/y", "--pre-vote", "--experimental-foo=1",
	}
	done := make(chan int, 1)
	go func() { done <- run(args, envOf(nil), &stdout, &stderr) }()

	// run catches signals before it logs, so once a warning shows, SIGINT
	// reaches run and not the default handler.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "ignoring etcd flag") {
		select {
		case code := <-done:
			t.Fatalf("run returned %d before logging; stderr %q", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning logged after 10s; stderr %q", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("got exit code %d, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return 30s after SIGINT; stderr %q", stderr.String())
	}
	out := stderr.String()
	for _, f := range []string{"wal-dir", "pre-vote", "experimental-foo"} {
		line := `level=WARN msg="ignoring etcd flag" flag=` + f + "\n"
		if n := strings.Count(out, line); n != 1 {
			t.Errorf("got %d lines ending %q, want 1; stderr %q", n, line, out)
		}
	}
	if stdout.String() != "" {
		t.Errorf("got stdout %q, want nothing", stdout.String())
	}
}

func TestRun_fatalErrorExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var stdout, stderr testutil.Buffer
	args := []string{
		"--name", "run-test", "--metrics-listen", ln.Addr().String(), "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://127.0.0.1:0", "--listen-peer-urls", "http://127.0.0.1:0",
		"--gossip-listen", freeGossipAddr(t),
	}
	done := make(chan int, 1)
	go func() { done <- run(args, envOf(nil), &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("got exit code %d, want 1; stderr %q", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not fail on a taken port within 30s; stderr %q", stderr.String())
	}
	if !strings.Contains(stderr.String(), "level=ERROR") {
		t.Fatalf("got stderr %q, want an error logged", stderr.String())
	}
}

func FuzzLoadConfig_args(f *testing.F) {
	for _, s := range []string{
		"--name n1 --data-dir /x",
		"--experimental-a --experimental-b 1 --pre-vote=false",
		"--join a:1,b:2 -- extra",
		"---x --=y - --",
		"--name",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, ignored, err := loadConfig(strings.Fields(s), envOf(nil))
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("loadConfig(%q) returned an invalid config: %v", s, err)
		}
		if !slices.IsSorted(ignored) || len(slices.Compact(slices.Clone(ignored))) != len(ignored) {
			t.Fatalf("loadConfig(%q): got ignored %q, want each once, sorted", s, ignored)
		}
	})
}

// Each ClickHouse TLS flag without what it needs (a readable file that
// parses, its other half, an https URL) makes run exit 2 with a message
// naming the flag, and never the URL, which may hold a password.
func TestRun_clickhouseTLSErrors(t *testing.T) {
	caFile, certFile, keyFile := tlsFiles(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A certificate with the key of another.
	_, otherCert, _ := tlsFiles(t)
	const secret = "s3cret-pw"
	https := "https://u:" + secret + "@ch.example:8443"
	plain := "http://u:" + secret + "@ch.example:8123"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"ca file missing", []string{"--clickhouse-url", https, "--clickhouse-ca-file", filepath.Join(dir, "nope.pem")},
			[]string{"--clickhouse-ca-file", "no such file"}},
		{"ca file a directory", []string{"--clickhouse-url", https, "--clickhouse-ca-file", dir},
			[]string{"--clickhouse-ca-file", "is a directory"}},
		{"ca file not PEM", []string{"--clickhouse-url", https, "--clickhouse-ca-file", junk},
			[]string{"--clickhouse-ca-file", "holds no PEM certificate"}},
		{"cert without key", []string{"--clickhouse-url", https, "--clickhouse-cert-file", certFile},
			[]string{"--clickhouse-cert-file: needs a key file"}},
		{"key without cert", []string{"--clickhouse-url", https, "--clickhouse-key-file", keyFile},
			[]string{"--clickhouse-key-file: needs a certificate file"}},
		{"cert file missing", []string{"--clickhouse-url", https, "--clickhouse-cert-file", filepath.Join(dir, "nope.pem"), "--clickhouse-key-file", keyFile},
			[]string{"--clickhouse-cert-file", "no such file"}},
		{"key file missing", []string{"--clickhouse-url", https, "--clickhouse-cert-file", certFile, "--clickhouse-key-file", filepath.Join(dir, "nope.pem")},
			[]string{"--clickhouse-key-file", "no such file"}},
		{"key file not PEM", []string{"--clickhouse-url", https, "--clickhouse-cert-file", certFile, "--clickhouse-key-file", junk},
			[]string{"--clickhouse-cert-file: ", "junk.pem"}},
		{"key of another certificate", []string{"--clickhouse-url", https, "--clickhouse-cert-file", otherCert, "--clickhouse-key-file", keyFile},
			[]string{"--clickhouse-cert-file: ", "private key does not match public key"}},
		{"ca file with http", []string{"--clickhouse-url", plain, "--clickhouse-ca-file", caFile},
			[]string{"--clickhouse-ca-file: needs an https:// URL"}},
		{"cert and key with http", []string{"--clickhouse-url", plain, "--clickhouse-cert-file", certFile, "--clickhouse-key-file", keyFile},
			[]string{"--clickhouse-cert-file: needs an https://", "--clickhouse-key-file: needs an https://"}},
		{"server name without URL", []string{"--clickhouse-server-name", "ch.internal"},
			[]string{"--clickhouse-server-name: needs an https:// URL"}},
		{"ca file with a bare host", []string{"--clickhouse-url", "u:" + secret + "@ch.example", "--clickhouse-ca-file", caFile},
			[]string{"--clickhouse-ca-file: needs an https://"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, envOf(nil), &stdout, &stderr); code != exitUsage {
				t.Fatalf("got exit code %d, want %d; stderr %q", code, exitUsage, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("got stderr %q, want it to contain %q", stderr.String(), w)
				}
			}
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("stderr %q shows the URL's password", stderr.String())
			}
		})
	}
}

func TestConfig_clickhouseTLS(t *testing.T) {
	caFile, certFile, keyFile := tlsFiles(t)
	c := DefaultConfig()
	if cfg, err := c.clickhouseTLS(); cfg != nil || err != nil {
		t.Fatalf("no TLS option: got %v, %v; want nil, nil", cfg, err)
	}
	c.ClickHouseURL = "https://ch:8443"
	c.ClickHouseCAFile, c.ClickHouseCertFile, c.ClickHouseKeyFile, c.ClickHouseServerName = caFile, certFile, keyFile, "ch.internal"
	cfg, err := c.clickhouseTLS()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "ch.internal" || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("got RootCAs %v, %d certificates, ServerName %q, MinVersion %x", cfg.RootCAs, len(cfg.Certificates), cfg.ServerName, cfg.MinVersion)
	}
	c.ClickHouseCAFile = ""
	if cfg, err := c.clickhouseTLS(); err != nil || cfg.RootCAs != nil {
		t.Fatalf("no CA file: got RootCAs %v, %v; want nil (the system's roots)", cfg.RootCAs, err)
	}
	// The node's TLS versions and cipher suites bind the ClickHouse
	// dialer too, with no ClickHouse TLS file as well: it spoke TLS 1.2
	// to a server under --tls-min-version TLS1.3.
	c.ClickHouseCertFile, c.ClickHouseKeyFile, c.ClickHouseServerName = "", "", ""
	c.TLSMinVersion, c.TLSMaxVersion = "TLS1.2", "TLS1.2"
	c.CipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
	cfg, err = c.clickhouseTLS()
	if err != nil || cfg == nil {
		t.Fatalf("--tls-max-version alone: got %v, %v; want a config", cfg, err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS12 || len(cfg.CipherSuites) != 1 || cfg.CipherSuites[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
		t.Fatalf("got versions %x-%x, suites %x; want the flags'", cfg.MinVersion, cfg.MaxVersion, cfg.CipherSuites)
	}
	c.TLSMinVersion, c.TLSMaxVersion, c.CipherSuites = "TLS1.3", "", nil
	if cfg, err := c.clickhouseTLS(); err != nil || cfg.MinVersion != tls.VersionTLS13 {
		t.Fatalf("--tls-min-version TLS1.3: got %v, %v; want MinVersion TLS 1.3", cfg, err)
	}
}

func TestConfig_dispatchConfig_pacing(t *testing.T) {
	c := DefaultConfig()
	c.ClickHouseBatchInterval = 200 * time.Millisecond
	c.ClickHouseMaxInsertsPerSecond = 0.5
	c.ClickHouseMaxInflightInserts = 4
	c.ClickHouseTimeout = time.Minute
	d := c.dispatchConfig()
	if d.BatchInterval != c.ClickHouseBatchInterval || d.MaxInsertsPerSecond != 0.5 || d.MaxInflightInserts != 4 || d.InsertTimeout != time.Minute {
		t.Errorf("dispatch config: got batch interval %v, %v inserts a second, %d in flight, timeout %v; want 200ms, 0.5, 4, 1m",
			d.BatchInterval, d.MaxInsertsPerSecond, d.MaxInflightInserts, d.InsertTimeout)
	}
}

// TestLoadConfig_etcdEnvironment: etcd reads each flag from ETCD_<FLAG>,
// chute from CHUTE_<FLAG>. etcd's variable of a security flag stops
// chute (ETCD_CLIENT_CERT_AUTH=true, ignored, left the node open where
// etcd's is closed); the others are warned of, where they went
// unmentioned.
func TestLoadConfig_etcdEnvironment(t *testing.T) {
	_, _, err := loadConfig(nil, envOf(map[string]string{"ETCD_CLIENT_CERT_AUTH": "true"}))
	if err == nil || !strings.Contains(err.Error(), "ETCD_CLIENT_CERT_AUTH") || !strings.Contains(err.Error(), "CHUTE_CLIENT_CERT_AUTH") {
		t.Fatalf("ETCD_CLIENT_CERT_AUTH: %v, want an error naming it and CHUTE_CLIENT_CERT_AUTH", err)
	}
	cfg, ignored, err := loadConfig(nil, envOf(map[string]string{"ETCD_NAME": "fromenv", "ETCD_SNAPSHOT_COUNT": "5"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name == "fromenv" {
		t.Fatal("ETCD_NAME was read")
	}
	want := []string{"ETCD_NAME (environment; chute reads CHUTE_NAME)", "ETCD_SNAPSHOT_COUNT (environment; chute reads CHUTE_SNAPSHOT_COUNT)"}
	if !reflect.DeepEqual(ignored, want) {
		t.Errorf("ignored %q, want %q", ignored, want)
	}
}
