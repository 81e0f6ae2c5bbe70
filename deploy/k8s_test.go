//go:build e2e

package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const k8sDir = "deploy/k8s"

// k8sObject is one manifest document; the parts the checks read are typed.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec       yaml.Node         `yaml:"spec"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"` // a Kustomization
	file       string
}

type serviceSpec struct {
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		Protocol   string `yaml:"protocol"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type statefulSetSpec struct {
	ServiceName string `yaml:"serviceName"`
	Replicas    int    `yaml:"replicas"`
	Selector    struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec podSpec `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			AccessModes []string `yaml:"accessModes"`
			Resources   struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	} `yaml:"volumeClaimTemplates"`
	PodManagementPolicy string `yaml:"podManagementPolicy"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		FSGroup      *int `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name     string `yaml:"name"`
				Key      string `yaml:"key"`
				Optional bool   `yaml:"optional"`
			} `yaml:"secretKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Lifecycle      struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
			Exec *struct {
				Command []string `yaml:"command"`
			} `yaml:"exec"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type pdbSpec struct {
	MinAvailable   any `yaml:"minAvailable"`
	MaxUnavailable any `yaml:"maxUnavailable"`
	Selector       struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
}

// loadK8s parses every YAML file of deploy/k8s, each possibly holding
// several documents.
func loadK8s(t testing.TB) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoFile(k8sDir), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/k8s: no YAML files (%v)", err)
	}
	var objs []k8sObject
	for _, f := range files {
		dec := yaml.NewDecoder(bytes.NewReader(mustRead(t, f)))
		for n := 1; ; n++ {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", filepath.Base(f), n, err)
			}
			o.file = filepath.Base(f)
			if o.APIVersion == "" || o.Kind == "" || (o.Metadata.Name == "" && o.Kind != "Kustomization") {
				t.Errorf("%s: document %d: want apiVersion, kind and metadata.name", o.file, n)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func one(t testing.TB, objs []k8sObject, kind string) []k8sObject {
	t.Helper()
	var out []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		t.Fatalf("deploy/k8s: no %s", kind)
	}
	return out
}

func decodeSpec(t testing.TB, o k8sObject, into any) {
	t.Helper()
	if err := o.Spec.Decode(into); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestK8s(t *testing.T) {
	objs := loadK8s(t)

	// The Kustomization lists every other file.
	kust := one(t, objs, "Kustomization")[0]
	var files []string
	for _, o := range objs {
		if o.Kind != "Kustomization" && !slices.Contains(files, o.file) {
			files = append(files, o.file)
		}
	}
	if !slices.Equal(sortedCopy(kust.Resources), sortedCopy(files)) {
		t.Errorf("kustomization.yaml: resources %v, want the manifests %v", kust.Resources, files)
	}

	stsObj := one(t, objs, "StatefulSet")[0]
	var sts statefulSetSpec
	decodeSpec(t, stsObj, &sts)
	pod := sts.Template.Spec
	podLabels := sts.Template.Metadata.Labels
	if !subset(sts.Selector.MatchLabels, podLabels) {
		t.Errorf("StatefulSet: selector %v does not select the pod labels %v", sts.Selector.MatchLabels, podLabels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("StatefulSet: %d containers, want chute alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image == "" || !pod.SecurityContext.RunAsNonRoot {
		t.Errorf("StatefulSet: image %q, runAsNonRoot %v: want an image, run as non-root", c.Image, pod.SecurityContext.RunAsNonRoot)
	}
	checkK8sDataDir(t, sts, c)

	// serviceName is a headless Service selecting the pods, published
	// before they are ready so that starting pods find each other.
	services := map[string]serviceSpec{}
	for _, o := range one(t, objs, "Service") {
		var s serviceSpec
		decodeSpec(t, o, &s)
		services[o.Metadata.Name] = s
	}
	headless, ok := services[sts.ServiceName]
	switch {
	case !ok:
		t.Fatalf("StatefulSet: serviceName %q is no Service", sts.ServiceName)
	case headless.ClusterIP != "None":
		t.Errorf("Service %s: clusterIP %q, want None (headless)", sts.ServiceName, headless.ClusterIP)
	case !headless.PublishNotReadyAddresses:
		t.Errorf("Service %s: publishNotReadyAddresses false: pods that are not ready yet could not be joined", sts.ServiceName)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, s := range services {
		if !subset(s.Selector, podLabels) {
			t.Errorf("Service %s: selector %v does not select the pod labels %v", name, s.Selector, podLabels)
		}
		for _, p := range s.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s: port %s targets %q, no container port of that name", name, p.Name, p.TargetPort)
			}
		}
	}

	// The config: from the ConfigMap, mounted where --config says.
	cfgArg, ok := flagArg(c.Args, "config")
	if !ok {
		t.Fatal("StatefulSet: no --config")
	}
	var cmName string
	for _, m := range c.VolumeMounts {
		if filepath.Dir(cfgArg) == m.MountPath {
			for _, v := range pod.Volumes {
				if v.Name == m.Name {
					cmName = v.ConfigMap.Name
				}
			}
		}
	}
	var cfgText string
	for _, o := range one(t, objs, "ConfigMap") {
		if o.Metadata.Name == cmName {
			cfgText = o.Data[filepath.Base(cfgArg)]
		}
	}
	if cfgText == "" {
		t.Fatalf("StatefulSet: --config %s is no key of a ConfigMap mounted at %s", cfgArg, filepath.Dir(cfgArg))
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cfgText), &cfg); err != nil {
		t.Fatalf("ConfigMap %s: %s: %v", cmName, filepath.Base(cfgArg), err)
	}
	for _, secret := range []string{"clickhouse_url", "gossip_key", "name"} {
		if _, ok := cfg[secret]; ok {
			t.Errorf("ConfigMap %s: %s belongs in the Secret or the pod, not in the shared config", cmName, secret)
		}
	}

	// A fresh cluster's pods start in parallel and bootstrap raft
	// together: all of them are expected.
	if sts.PodManagementPolicy != "Parallel" {
		t.Errorf("StatefulSet: podManagementPolicy %q, want Parallel", sts.PodManagementPolicy)
	}
	if v, _ := cfg["bootstrap_expect"].(int); v != sts.Replicas {
		t.Errorf("ConfigMap %s: bootstrap_expect %v, want the replica count %d: the pods of a fresh cluster start at once and must bootstrap one cluster together", cmName, cfg["bootstrap_expect"], sts.Replicas)
	}

	// Every port chute listens on is a named container port.
	portOf := func(key string) string {
		v, _ := cfg[key].(string)
		if _, rest, ok := strings.Cut(v, "://"); ok {
			v = rest
		}
		_, p, _ := net.SplitHostPort(v)
		return p
	}
	for key, name := range map[string]string{"listen_client_urls": "client", "listen_peer_urls": "peer", "gossip_listen": "gossip-tcp", "metrics_listen": "metrics"} {
		if p := portOf(key); p == "" || strconv.Itoa(ports[name]) != p {
			t.Errorf("ConfigMap %s: %s port %q, container port %s is %d", cmName, key, p, name, ports[name])
		}
	}
	var udp bool
	for _, p := range c.Ports {
		udp = udp || (p.Protocol == "UDP" && strconv.Itoa(p.ContainerPort) == portOf("gossip_listen"))
	}
	if !udp {
		t.Error("StatefulSet: gossip needs its port over UDP as well")
	}

	// Probes: /healthz (startup, liveness) and /readyz (readiness) on the
	// metrics port.
	for name, p := range map[string]*probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		want := "/healthz"
		if name == "readinessProbe" {
			want = "/readyz"
		}
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || ports[p.HTTPGet.Port] == 0 || p.HTTPGet.Port != "metrics" {
			t.Errorf("StatefulSet: %s: want httpGet %s on the metrics port", name, want)
		}
	}

	// preStop, then SIGTERM's graceful leave (at most 10 s), within the
	// grace period.
	pre := c.Lifecycle.PreStop
	if pre == nil || (pre.Sleep == nil && pre.Exec == nil) {
		t.Fatal("StatefulSet: no preStop hook")
	}
	grace := 30
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	if pre.Sleep != nil && pre.Sleep.Seconds+10+5 > grace {
		t.Errorf("StatefulSet: preStop sleeps %d s, shutdown takes up to 10 s: terminationGracePeriodSeconds %d is too short", pre.Sleep.Seconds, grace)
	}

	// The PDB selects the pods and holds for any replica count.
	var pdb pdbSpec
	decodeSpec(t, one(t, objs, "PodDisruptionBudget")[0], &pdb)
	if !subset(pdb.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget: selector %v does not select the pod labels %v", pdb.Selector.MatchLabels, podLabels)
	}
	if pdb.MaxUnavailable != 1 || pdb.MinAvailable != nil {
		t.Error("PodDisruptionBudget: want maxUnavailable: 1 (a minAvailable count would tie it to the replica count)")
	}

	// The environment: name from the pod, ClickHouse URL from the Secret.
	env := map[string]string{}
	secrets := map[string]map[string]string{}
	for _, o := range one(t, objs, "Secret") {
		s := maps.Clone(o.StringData)
		if s == nil {
			s = map[string]string{}
		}
		maps.Copy(s, o.Data) // base64 values: their keys are what matters here
		secrets[o.Metadata.Name] = s
	}
	podName := "chute-0"
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				env[e.Name] = podName
			case "status.podIP":
				env[e.Name] = "127.0.0.1"
			case "metadata.namespace":
				env[e.Name] = "default"
			default:
				t.Errorf("env %s: fieldRef %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secrets[ref.Name][ref.Key]
			switch {
			case ok:
				env[e.Name] = v
			case !ref.Optional:
				t.Errorf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = k8sBytes(t, c.Resources.Limits[strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits.")])
		}
	}
	nameFrom := func(name string) string {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				return e.ValueFrom.FieldRef.FieldPath
			}
		}
		return ""
	}
	if nameFrom("CHUTE_NAME") != "metadata.name" {
		t.Error("StatefulSet: CHUTE_NAME must come from the pod's name (fieldRef metadata.name)")
	}
	if _, ok := flagArg(c.Args, "name"); ok {
		t.Error("StatefulSet: --name in args would give every pod one name")
	}
	var fromSecret bool
	for _, e := range c.Env {
		if e.Name == "CHUTE_CLICKHOUSE_URL" {
			fromSecret = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}
	}
	if !fromSecret {
		t.Error("StatefulSet: CHUTE_CLICKHOUSE_URL (it holds the password) must come from a Secret")
	}
	checkGoMemLimit(t, env["GOMEMLIMIT"], c.Resources.Limits["memory"])

	// Advertised addresses are the pod's own: its IP for gossip, its DNS
	// name under the headless Service for the TLS links, since the
	// certificate names the pods, not their IPs.
	ipVar, nsVar := "", ""
	for _, e := range c.Env {
		switch nameFrom(e.Name) {
		case "status.podIP":
			ipVar = e.Name
		case "metadata.namespace":
			nsVar = e.Name
		}
	}
	if v, _ := flagArg(c.Args, "gossip-advertise"); ipVar == "" || !strings.Contains(v, "$("+ipVar+")") {
		t.Errorf("StatefulSet: --gossip-advertise %q: want the pod IP, $(%s) from status.podIP", v, ipVar)
	}
	podHost := "$(CHUTE_NAME)." + sts.ServiceName + ".$(" + nsVar + ").svc"
	for f, port := range map[string]int{"advertise-client-urls": ports["client"], "advertise-peer-urls": ports["peer"]} {
		if v, _ := flagArg(c.Args, f); nsVar == "" || v != "https://"+net.JoinHostPort(podHost, strconv.Itoa(port)) {
			t.Errorf("StatefulSet: --%s %q: want https://%s:%d, the pod's name under the headless Service", f, v, podHost, port)
		}
	}
	tlsDir := checkK8sTLS(t, pod, c, cfg)

	// --join names the headless Service only: it resolves to every pod, so
	// 3 or 5 replicas need the same files.
	var seeds []string
	switch j := cfg["join"].(type) {
	case string:
		seeds = strings.Split(j, ",")
	case []any:
		for _, s := range j {
			seeds = append(seeds, fmt.Sprint(s))
		}
	}
	if v, ok := flagArg(c.Args, "join"); ok {
		seeds = strings.Split(v, ",")
	}
	if len(seeds) == 0 {
		t.Error("no --join: pods would not find each other")
	}
	for _, s := range seeds {
		host, _, err := net.SplitHostPort(strings.TrimSpace(s))
		first, _, _ := strings.Cut(host, ".")
		if err != nil || first != sts.ServiceName {
			t.Errorf("join seed %q: want the headless Service %s (it resolves to every pod)", s, sts.ServiceName)
		}
	}
	ordinal := regexp.MustCompile(`\b` + regexp.QuoteMeta(stsObj.Metadata.Name) + `-\d+\b`)
	for _, f := range files {
		if m := ordinal.FindString(string(mustRead(t, filepath.Join(repoFile(k8sDir), f)))); m != "" {
			t.Errorf("%s names the pod %s: scaling would need a change", f, m)
		}
	}

	// Every pod of 5 replicas gets a name of its own from the same spec,
	// and its certificate from the Secret (here: one of gen-certs.sh,
	// under cert-manager's file names).
	cfgFile := filepath.Join(t.TempDir(), filepath.Base(cfgArg))
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	certs := genCerts(t)
	secretDir := t.TempDir()
	for from, to := range map[string]string{"ca.pem": "ca.crt", "chute-1.pem": "tls.crt", "chute-1-key.pem": "tls.key"} {
		if err := os.WriteFile(filepath.Join(secretDir, to), mustReadAbs(t, filepath.Join(certs, from)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client := clientTLS(t, filepath.Join(certs, "ca.pem"), filepath.Join(certs, "client.pem"), filepath.Join(certs, "client-key.pem"))
	for i := range 5 {
		name := fmt.Sprintf("%s-%d", stsObj.Metadata.Name, i)
		e := maps.Clone(env)
		e["CHUTE_NAME"] = name
		l := launch{name: "k8s pod " + name, args: expandK8s(c.Args, e), env: e,
			files: map[string]string{cfgArg: cfgFile, tlsDir: secretDir}, client: client}
		if i == 0 || i == 4 {
			t.Run(name, func(t *testing.T) { checkLaunch(t, l) })
		}
	}
}

// checkK8sDataDir: --data-dir is the mount of a volumeClaimTemplate,
// writable, with an fsGroup so that the non-root user may write it: a
// pod keeps its raft log across restarts and rescheduling.
func checkK8sDataDir(t *testing.T, sts statefulSetSpec, c container) {
	t.Helper()
	dir, ok := flagArg(c.Args, "data-dir")
	if !ok {
		t.Error("StatefulSet: no --data-dir: the raft log would go to the read-only root file system")
		return
	}
	var claim string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && !m.ReadOnly && m.SubPath == "" {
			claim = m.Name
		}
	}
	found := false
	for _, vct := range sts.VolumeClaimTemplates {
		if vct.Metadata.Name != claim {
			continue
		}
		found = true
		if vct.Spec.Resources.Requests["storage"] == "" || !slices.Contains(vct.Spec.AccessModes, "ReadWriteOnce") {
			t.Errorf("StatefulSet: volumeClaimTemplate %s: want a storage request and ReadWriteOnce", claim)
		}
	}
	if !found {
		t.Errorf("StatefulSet: --data-dir=%s is not the writable mount of a volumeClaimTemplate", dir)
	}
	if sts.Template.Spec.SecurityContext.FSGroup == nil {
		t.Error("StatefulSet: no fsGroup: the non-root user may not write the volume")
	}
}

// k8sTLSSecret is the Secret of the pods' certificates, in cert-manager's
// layout.
const k8sTLSSecret = "chute-tls"

// checkK8sTLS: the Secret chute-tls is mounted read-only (whole, so that
// renewals reach the pod) and readable by the pod's group; the etcd API
// and the peer link are https:// and mutual TLS with its files. It
// returns the Secret's mount path.
func checkK8sTLS(t *testing.T, pod podSpec, c container, cfg map[string]any) string {
	t.Helper()
	var vol string
	for _, v := range pod.Volumes {
		if v.Secret.SecretName == k8sTLSSecret {
			vol = v.Name
		}
	}
	var dir string
	for _, m := range c.VolumeMounts {
		if m.Name != vol || vol == "" {
			continue
		}
		dir = m.MountPath
		if !m.ReadOnly || m.SubPath != "" {
			t.Errorf("StatefulSet: Secret %s mounted at %s with readOnly %v, subPath %q: want read-only and whole (a subPath never sees a renewal)",
				k8sTLSSecret, m.MountPath, m.ReadOnly, m.SubPath)
		}
	}
	if dir == "" {
		t.Fatalf("StatefulSet: the Secret %s is not mounted", k8sTLSSecret)
	}
	if pod.SecurityContext.FSGroup == nil {
		t.Error("StatefulSet: no fsGroup: the non-root user may not read the Secret's files")
	}
	for _, key := range []string{"listen_client_urls", "listen_peer_urls"} {
		if v, _ := cfg[key].(string); !strings.HasPrefix(v, "https://") {
			t.Errorf("ConfigMap: %s %q, want https://", key, v)
		}
	}
	for flag, want := range map[string]string{
		"cert-file": "tls.crt", "key-file": "tls.key", "trusted-ca-file": "ca.crt",
		"peer-cert-file": "tls.crt", "peer-key-file": "tls.key", "peer-trusted-ca-file": "ca.crt",
	} {
		if v, _ := flagArg(c.Args, flag); v != path.Join(dir, want) {
			t.Errorf("StatefulSet: --%s %q, want %s", flag, v, path.Join(dir, want))
		}
	}
	for _, flag := range []string{"client-cert-auth", "peer-client-cert-auth"} {
		if !slices.Contains(c.Args, "--"+flag) && !slices.Contains(c.Args, "--"+flag+"=true") {
			t.Errorf("StatefulSet: no --%s: the port would take any client", flag)
		}
	}
	return dir
}

// expandK8s expands $(VAR) in args from env, as the kubelet does.
func expandK8s(args []string, env map[string]string) []string {
	re := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = re.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// k8sBytes turns a quantity such as 1Gi or 512Mi into bytes.
func k8sBytes(t testing.TB, q string) string {
	t.Helper()
	units := map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "": 1}
	m := regexp.MustCompile(`^(\d+)(Ki|Mi|Gi|)$`).FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("quantity %q: want a number with Ki, Mi or Gi", q)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return strconv.FormatInt(n*units[m[2]], 10)
}

// checkGoMemLimit: GOMEMLIMIT is 90% of the memory limit, in bytes or
// with a unit the Go runtime reads, so that the garbage collector works
// harder before the kernel kills the pod.
func checkGoMemLimit(t *testing.T, goMemLimit, limit string) {
	t.Helper()
	if limit == "" {
		t.Fatal("StatefulSet: no memory limit")
	}
	want, _ := strconv.ParseInt(k8sBytes(t, limit), 10, 64)
	want = want * 90 / 100
	m := regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB|)$`).FindStringSubmatch(goMemLimit)
	if m == nil {
		t.Fatalf("StatefulSet: GOMEMLIMIT %q, want %d (90%% of limits.memory %s)", goMemLimit, want, limit)
	}
	got, _ := strconv.ParseInt(m[1], 10, 64)
	got *= map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
	// A unit rounds down: within a MiB of 90%, never above.
	if got > want || got < want-(1<<20) {
		t.Errorf("StatefulSet: GOMEMLIMIT %q is %d bytes, want %d (90%% of limits.memory %s)", goMemLimit, got, want, limit)
	}
}
