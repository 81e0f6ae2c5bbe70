//go:build e2e

package deploy_test

import (
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeService is the part of a compose service the checks read.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       map[string]string `yaml:"build"`
	Hostname    string            `yaml:"hostname"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   yaml.Node         `yaml:"depends_on"` // a list or a map

}

const composeDir = "deploy/compose"

// loadCompose parses docker-compose.yml (YAML merge keys resolved).
func loadCompose(t testing.TB) map[string]composeService {
	t.Helper()
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, composeDir+"/docker-compose.yml"), &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(doc.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return doc.Services
}

// chuteServices returns the names of the services that run chute: those
// built from its Dockerfile.
func chuteServices(svcs map[string]composeService) []string {
	var names []string
	for name, s := range svcs {
		if s.Build["dockerfile"] == "deploy/docker/Dockerfile" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// flagArg returns the value of --name=value in args.
func flagArg(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// composeCerts is the directory gen-certs.sh writes by default, mounted
// into the chute services; the tests use a fresh one in its place.
const composeCerts = "./certs"

// volumeFiles maps a service's bind mounts (container path) to files
// here; the certificates' mount maps to certs, made by gen-certs.sh.
func volumeFiles(t testing.TB, svc string, s composeService, certs string) map[string]string {
	files := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			continue // a named volume
		}
		if path.Clean(parts[0]) == path.Clean(composeCerts) {
			files[parts[1]] = certs
			continue
		}
		files[parts[1]] = filepath.Join(repoFile(composeDir), filepath.FromSlash(parts[0]))
	}
	return files
}

func TestCompose(t *testing.T) {
	certs := genCerts(t)
	svcs := loadCompose(t)
	nodes := chuteServices(svcs)
	if len(nodes) != 3 {
		t.Fatalf("docker-compose.yml: chute services %v, want three", nodes)
	}
	for _, want := range []string{"clickhouse", "jaeger", "prometheus"} {
		if _, ok := svcs[want]; !ok {
			t.Errorf("docker-compose.yml: no %s service", want)
		}
	}
	published := map[string]string{}
	for name, s := range svcs {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		for _, dep := range dependsOn(t, name, s) {
			if _, ok := svcs[dep]; !ok {
				t.Errorf("%s: depends_on %s, which is no service", name, dep)
			}
		}
		for f, local := range volumeFiles(t, name, s, certs) {
			if _, err := os.Stat(local); err != nil {
				t.Errorf("%s: volume %s: %v", name, f, err)
			}
		}
		for _, p := range s.Ports {
			host, _, _ := strings.Cut(p, ":")
			if other, dup := published[host]; dup {
				t.Errorf("host port %s published by %s and %s", host, other, name)
			}
			published[host] = name
		}
	}

	// The image is built from the repository's Dockerfile.
	for _, n := range nodes {
		b := svcs[n].Build
		if b == nil {
			continue
		}
		ctx := filepath.Join(repoFile(composeDir), filepath.FromSlash(b["context"]))
		if filepath.Clean(ctx) != filepath.Clean(root) {
			t.Errorf("%s: build context %s, want the repository root", n, b["context"])
		}
	}

	// Every node joins the others: the seeds of the config are the nodes'
	// gossip addresses, and each node advertises its own name.
	cfgPath := volumeFiles(t, nodes[0], svcs[nodes[0]], certs)[svcs[nodes[0]].Environment["CHUTE_CONFIG"]]
	if cfgPath == "" {
		t.Fatalf("%s: CHUTE_CONFIG names no mounted file", nodes[0])
	}
	var cfg struct {
		Join          []string `yaml:"join"`
		MetricsListen string   `yaml:"metrics_listen"`
		GossipListen  string   `yaml:"gossip_listen"`
	}
	if err := yaml.Unmarshal(mustRead(t, cfgPath), &cfg); err != nil {
		t.Fatalf("%s: %v", cfgPath, err)
	}
	_, gossipPort, _ := net.SplitHostPort(cfg.GossipListen)
	_, metricsPort, _ := net.SplitHostPort(cfg.MetricsListen)
	var seeds, names []string
	for _, n := range nodes {
		s := svcs[n]
		adv, _ := flagArg(s.Command, "gossip-advertise")
		host := s.Hostname
		if host == "" {
			host = n
		}
		if adv != net.JoinHostPort(host, gossipPort) {
			t.Errorf("%s: --gossip-advertise %q, want %s", n, adv, net.JoinHostPort(host, gossipPort))
		}
		seeds = append(seeds, net.JoinHostPort(host, gossipPort))
		name, _ := flagArg(s.Command, "name")
		if name == "" || slices.Contains(names, name) {
			t.Errorf("%s: --name %q: want a name of its own", n, name)
		}
		names = append(names, name)
	}
	if !slices.Equal(sortedCopy(cfg.Join), sortedCopy(seeds)) {
		t.Errorf("%s: join %v, want every node %v", cfgPath, cfg.Join, seeds)
	}

	// ClickHouse: the URL's user and password are the server's; the table
	// is created at its first start.
	ch := svcs["clickhouse"]
	u, err := url.Parse(svcs[nodes[0]].Environment["CHUTE_CLICKHOUSE_URL"])
	if err != nil {
		t.Fatalf("CHUTE_CLICKHOUSE_URL: %v", err)
	}
	pass, _ := u.User.Password()
	if u.Hostname() != "clickhouse" || u.User.Username() != ch.Environment["CLICKHOUSE_USER"] || pass != ch.Environment["CLICKHOUSE_PASSWORD"] {
		t.Errorf("CHUTE_CLICKHOUSE_URL names host %s user %s, want the clickhouse service's host, CLICKHOUSE_USER and CLICKHOUSE_PASSWORD",
			u.Hostname(), u.User.Username())
	}
	var initSQL string
	for dst, local := range volumeFiles(t, "clickhouse", ch, certs) {
		if strings.HasPrefix(dst, "/docker-entrypoint-initdb.d/") {
			initSQL = string(mustRead(t, local))
		}
	}
	if !regexp.MustCompile(`(?i)CREATE TABLE IF NOT EXISTS default\.events`).MatchString(initSQL) {
		t.Errorf("clickhouse: no init script in /docker-entrypoint-initdb.d/ creating default.events:\n%s", initSQL)
	}

	// Traces go to the jaeger service's OTLP gRPC receiver.
	otlp, err := url.Parse(svcs[nodes[0]].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
	if err != nil || otlp.Hostname() != "jaeger" || otlp.Port() != "4317" || svcs[nodes[0]].Environment["OTEL_EXPORTER_OTLP_PROTOCOL"] != "grpc" {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q (protocol %q): want jaeger's OTLP gRPC receiver, http://jaeger:4317 over grpc",
			svcs[nodes[0]].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"], svcs[nodes[0]].Environment["OTEL_EXPORTER_OTLP_PROTOCOL"])
	}
	if !slices.ContainsFunc(svcs["jaeger"].Command, func(a string) bool { return strings.Contains(a, "grpc.endpoint=0.0.0.0:4317") }) {
		t.Errorf("jaeger: command %q does not open OTLP gRPC on 0.0.0.0:4317", svcs["jaeger"].Command)
	}

	// Prometheus scrapes every node's metrics port.
	promPath := volumeFiles(t, "prometheus", svcs["prometheus"], certs)["/etc/prometheus/prometheus.yml"]
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(mustRead(t, promPath), &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var targets, wantTargets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("prometheus.yml: metrics_path %s, want /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, n := range nodes {
		host := svcs[n].Hostname
		if host == "" {
			host = n
		}
		wantTargets = append(wantTargets, net.JoinHostPort(host, metricsPort))
	}
	if !slices.Equal(sortedCopy(targets), sortedCopy(wantTargets)) {
		t.Errorf("prometheus.yml: targets %v, want %v", targets, wantTargets)
	}

	checkComposeTLS(t, svcs, nodes, cfgPath, certs)
	checkComposeData(t, svcs, nodes, cfgPath)

	client := clientTLS(t, filepath.Join(certs, "ca.pem"), filepath.Join(certs, "client.pem"), filepath.Join(certs, "client-key.pem"))
	for _, n := range nodes {
		s := svcs[n]
		t.Run(n, func(t *testing.T) {
			checkLaunch(t, launch{name: "compose " + n, args: s.Command, env: s.Environment, files: volumeFiles(t, n, s, certs), client: client})
		})
	}
}

// checkComposeTLS: the etcd API and the peer link of every node are
// https:// and mutual TLS, with the node's own certificate from
// gen-certs.sh (valid for the name it advertises) and the compose CA; the
// metrics port stays plain HTTP for Prometheus.
func checkComposeTLS(t *testing.T, svcs map[string]composeService, nodes []string, cfgPath, certs string) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(mustRead(t, cfgPath), &cfg); err != nil {
		t.Fatalf("%s: %v", cfgPath, err)
	}
	for _, key := range []string{"listen_client_urls", "listen_peer_urls"} {
		if v, _ := cfg[key].(string); !strings.HasPrefix(v, "https://") {
			t.Errorf("%s: %s %q, want https://", cfgPath, key, v)
		}
	}
	if v, _ := cfg["metrics_listen"].(string); strings.Contains(v, "://") {
		t.Errorf("%s: metrics_listen %q, want host:port (Prometheus scrapes plain HTTP)", cfgPath, v)
	}
	for _, n := range nodes {
		s := svcs[n]
		host := s.Hostname
		if host == "" {
			host = n
		}
		var mount string
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) == 3 && path.Clean(parts[0]) == path.Clean(composeCerts) {
				if parts[2] != "ro" {
					t.Errorf("%s: certificates mounted %q, want read-only", n, v)
				}
				mount = parts[1]
			}
		}
		if mount == "" {
			t.Errorf("%s: %s is not mounted (read-only)", n, composeCerts)
			continue
		}
		want := map[string]string{
			"cert-file": n + ".pem", "key-file": n + "-key.pem",
			"peer-cert-file": n + ".pem", "peer-key-file": n + "-key.pem",
		}
		for flag, file := range want {
			if v, _ := flagArg(s.Command, flag); v != path.Join(mount, file) {
				t.Errorf("%s: --%s %q, want %s", n, flag, v, path.Join(mount, file))
			}
		}
		for v, val := range map[string]string{
			"CHUTE_CLIENT_CERT_AUTH": "true", "CHUTE_TRUSTED_CA_FILE": path.Join(mount, "ca.pem"),
			"CHUTE_PEER_CLIENT_CERT_AUTH": "true", "CHUTE_PEER_TRUSTED_CA_FILE": path.Join(mount, "ca.pem"),
		} {
			if s.Environment[v] != val {
				t.Errorf("%s: %s %q, want %q", n, v, s.Environment[v], val)
			}
		}
		cert := parseCert(t, filepath.Join(certs, n+".pem"))
		for _, flag := range []string{"advertise-client-urls", "advertise-peer-urls"} {
			v, _ := flagArg(s.Command, flag)
			u, err := url.Parse(v)
			if err != nil || u.Scheme != "https" || u.Hostname() != host {
				t.Errorf("%s: --%s %q, want https://%s:port", n, flag, v, host)
				continue
			}
			if err := cert.VerifyHostname(u.Hostname()); err != nil {
				t.Errorf("%s: --%s %s: the node's certificate: %v", n, flag, v, err)
			}
		}
	}
}

// checkComposeData: every node keeps its raft log in a named volume of
// its own, mounted at the data_dir of chute.yaml and declared at the top
// level, so that `docker compose down` and `up` keep the cluster; the
// three fresh nodes bootstrap one cluster together.
func checkComposeData(t *testing.T, svcs map[string]composeService, nodes []string, cfgPath string) {
	t.Helper()
	var cfg struct {
		DataDir         string `yaml:"data_dir"`
		BootstrapExpect int    `yaml:"bootstrap_expect"`
	}
	if err := yaml.Unmarshal(mustRead(t, cfgPath), &cfg); err != nil {
		t.Fatalf("%s: %v", cfgPath, err)
	}
	if cfg.BootstrapExpect != len(nodes) {
		t.Errorf("%s: bootstrap_expect %d, want %d: the nodes start together and must bootstrap one cluster", cfgPath, cfg.BootstrapExpect, len(nodes))
	}
	if cfg.DataDir == "" {
		t.Fatalf("%s: no data_dir", cfgPath)
	}
	var top struct {
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, composeDir+"/docker-compose.yml"), &top); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	owner := map[string]string{}
	for _, n := range nodes {
		var vol string
		for _, v := range svcs[n].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && path.Clean(parts[1]) == path.Clean(cfg.DataDir) {
				vol = parts[0]
			}
		}
		_, declared := top.Volumes[vol]
		switch {
		case vol == "":
			t.Errorf("%s: nothing mounted at data_dir %s: the raft log would be lost with the container", n, cfg.DataDir)
		case strings.HasPrefix(vol, ".") || strings.HasPrefix(vol, "/"):
			t.Errorf("%s: data_dir is the bind mount %s: want a named volume, which the image makes writable for its user", n, vol)
		case !declared:
			t.Errorf("%s: volume %s is not declared under the top-level volumes", n, vol)
		case owner[vol] != "":
			t.Errorf("%s and %s share the volume %s: each node needs its own data dir", owner[vol], n, vol)
		}
		owner[vol] = n
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	rel, err := filepath.Rel(root, path)
	if err != nil {
		t.Fatal(err)
	}
	return readRepoFile(t, rel)
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// dependsOn returns the services a service depends on, in either form.
func dependsOn(t testing.TB, name string, s composeService) []string {
	t.Helper()
	var list []string
	switch s.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		if err := s.DependsOn.Decode(&list); err != nil {
			t.Errorf("%s: depends_on: %v", name, err)
		}
	case yaml.MappingNode:
		var m map[string]any
		if err := s.DependsOn.Decode(&m); err != nil {
			t.Errorf("%s: depends_on: %v", name, err)
		}
		for k := range m {
			list = append(list, k)
		}
	default:
		t.Errorf("%s: depends_on: want a list or a map", name)
	}
	return list
}
