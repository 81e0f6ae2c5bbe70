package tests

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../helm/chute"
	k8sDir   = "../k8s"
)

// manifest is one YAML document of a rendered chart or of deploy/k8s.
type manifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	file string
	doc  []byte
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// parseDocs parses every document of a YAML file; empty ones (comments
// only, or a template rendered to nothing) are skipped.
func parseDocs(file string, data []byte) ([]manifest, error) {
	var out []manifest
	for _, doc := range docSeparator.Split(string(data), -1) {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", file, err, doc)
		}
		if m.Kind == "" {
			if strings.TrimSpace(stripComments(doc)) != "" {
				return nil, fmt.Errorf("%s: a document without a kind:\n%s", file, doc)
			}
			continue
		}
		m.file, m.doc = file, []byte(doc)
		out = append(out, m)
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// render renders the chart as helm install would for release in the
// namespace default, with values over the chart's.
func render(t testing.TB, release string, values map[string]any) []manifest {
	t.Helper()
	out, err := renderErr(release, values)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(release string, values map[string]any) ([]manifest, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: release, Namespace: "default", IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []manifest
	for _, name := range names {
		ms, err := parseDocs(name, []byte(files[name]))
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// loadK8s reads the manifests of deploy/k8s, the Kustomization left out.
func loadK8s(t testing.TB) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no manifests (%v)", k8sDir, err)
	}
	var out []manifest
	for _, f := range files {
		ms, err := parseDocs(f, readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Kind != "Kustomization" {
				out = append(out, m)
			}
		}
	}
	return out
}

func kinds(ms []manifest, kind string) []manifest {
	var out []manifest
	for _, m := range ms {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// only returns the one object of kind, or fails.
func only(t testing.TB, ms []manifest, kind string) manifest {
	t.Helper()
	got := kinds(ms, kind)
	if len(got) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(got), kind)
	}
	return got[0]
}

func named(t testing.TB, ms []manifest, kind, name string) manifest {
	t.Helper()
	for _, m := range kinds(ms, kind) {
		if m.Metadata.Name == name {
			return m
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return manifest{}
}

// decode reads a manifest into its API type; a field the type does not
// have is an error, so a misspelt key fails here, not in the cluster.
func decode[T any](t testing.TB, m manifest) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(m.doc, &v); err != nil {
		t.Fatalf("%s %s (%s): %v", m.Kind, m.Metadata.Name, m.file, err)
	}
	return v
}

// generic reads a manifest (or a YAML text) as JSON values.
func generic(t testing.TB, doc []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func selects(sel, labels map[string]string) bool {
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

func asYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// same fails with both sides when got and want differ.
func same(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the chart renders\n%s\ndeploy/k8s has\n%s", what, asYAML(got), asYAML(want))
	}
}

// TestChart_matchesK8s: with its defaults, the chart renders the objects
// of deploy/k8s (its Secret left to the user) under the same names, with
// the same ports, arguments, environment, probes, volumes and config.
func TestChart_matchesK8s(t *testing.T) {
	chart, k8s := render(t, "chute", nil), loadK8s(t)
	var want, got []string
	for _, m := range k8s {
		if m.Kind != "Secret" {
			want = append(want, m.Kind+"/"+m.Metadata.Name)
		}
	}
	for _, m := range chart {
		got = append(got, m.Kind+"/"+m.Metadata.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the chart renders %v, want deploy/k8s's %v", got, want)
	}

	stsK, stsC := decode[appsv1.StatefulSet](t, only(t, k8s, "StatefulSet")), decode[appsv1.StatefulSet](t, only(t, chart, "StatefulSet"))
	podLabels := stsC.Spec.Template.Labels
	if !selects(stsC.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("StatefulSet: selector %v does not select the pods %v", stsC.Spec.Selector.MatchLabels, podLabels)
	}
	anti := stsC.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(anti) != 1 || !selects(anti[0].PodAffinityTerm.LabelSelector.MatchLabels, podLabels) {
		t.Error("StatefulSet: want one preferred anti-affinity term that selects chute's pods")
	}
	cK, cC := stsK.Spec.Template.Spec.Containers, stsC.Spec.Template.Spec.Containers
	if len(cK) != 1 || len(cC) != 1 {
		t.Fatalf("StatefulSet: %d containers in the chart, %d in deploy/k8s, want 1", len(cC), len(cK))
	}
	same(t, "args", cC[0].Args, cK[0].Args)
	same(t, "env", cC[0].Env, cK[0].Env)
	same(t, "ports", cC[0].Ports, cK[0].Ports)
	same(t, "probes", []any{cC[0].StartupProbe, cC[0].LivenessProbe, cC[0].ReadinessProbe}, []any{cK[0].StartupProbe, cK[0].LivenessProbe, cK[0].ReadinessProbe})
	same(t, "lifecycle", cC[0].Lifecycle, cK[0].Lifecycle)
	same(t, "resources", cC[0].Resources, cK[0].Resources)
	same(t, "volumeMounts", cC[0].VolumeMounts, cK[0].VolumeMounts)
	same(t, "securityContext", cC[0].SecurityContext, cK[0].SecurityContext)
	for _, pvc := range stsC.Spec.VolumeClaimTemplates {
		if !selects(pvc.Labels, podLabels) {
			t.Errorf("volumeClaimTemplate %s: labels %v, want some of the pods' %v (kubectl delete pvc -l ...)", pvc.Name, pvc.Labels, podLabels)
		}
	}
	// The rest of the spec, once the labels (the chart adds its own) are
	// set aside.
	for _, s := range []*appsv1.StatefulSet{&stsK, &stsC} {
		s.Spec.Selector = nil
		s.Spec.Template.ObjectMeta = stsK.Spec.Template.ObjectMeta
		s.Spec.Template.Spec.Affinity = nil
		for i := range s.Spec.VolumeClaimTemplates {
			s.Spec.VolumeClaimTemplates[i].Labels = nil
		}
	}
	same(t, "StatefulSet spec", stsC.Spec, stsK.Spec)

	for _, m := range kinds(k8s, "Service") {
		k, c := decode[corev1.Service](t, m), decode[corev1.Service](t, named(t, chart, "Service", m.Metadata.Name))
		if !selects(c.Spec.Selector, podLabels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", c.Name, c.Spec.Selector, podLabels)
		}
		k.Spec.Selector, c.Spec.Selector = nil, nil
		same(t, "Service "+c.Name, c.Spec, k.Spec)
	}

	pk, pc := decode[policyv1.PodDisruptionBudget](t, only(t, k8s, "PodDisruptionBudget")), decode[policyv1.PodDisruptionBudget](t, only(t, chart, "PodDisruptionBudget"))
	if !selects(pc.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget: selector %v does not select the pods %v", pc.Spec.Selector.MatchLabels, podLabels)
	}
	same(t, "PodDisruptionBudget maxUnavailable", pc.Spec.MaxUnavailable, pk.Spec.MaxUnavailable)

	cmK, cmC := decode[corev1.ConfigMap](t, only(t, k8s, "ConfigMap")), decode[corev1.ConfigMap](t, only(t, chart, "ConfigMap"))
	same(t, "ConfigMap chute.yaml", generic(t, []byte(cmC.Data["chute.yaml"])), generic(t, []byte(cmK.Data["chute.yaml"])))

	// The Secret the pods read is deploy/k8s's, with the same keys.
	sec := decode[corev1.Secret](t, only(t, k8s, "Secret"))
	for _, e := range cC[0].Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			if _, ok := sec.StringData[ref.SecretKeyRef.Key]; (!ok && !ptrTrue(ref.SecretKeyRef.Optional)) || ref.SecretKeyRef.Name != sec.Name {
				t.Errorf("env %s: Secret %s key %s, deploy/k8s's Secret is %s with %v", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, sec.Name, sec.StringData)
			}
		}
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// statefulSet renders the chart with values and returns its StatefulSet
// and chute's container.
func statefulSet(t testing.TB, release string, values map[string]any) (appsv1.StatefulSet, corev1.Container) {
	t.Helper()
	sts := decode[appsv1.StatefulSet](t, only(t, render(t, release, values), "StatefulSet"))
	return sts, sts.Spec.Template.Spec.Containers[0]
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

func TestChart_goMemLimit(t *testing.T) {
	for _, tc := range []struct {
		limit   any
		percent any
		want    string // "" for no GOMEMLIMIT
	}{
		{"1Gi", nil, "966367641"},
		{"1536Mi", nil, "1449551462"},
		{"1.5Gi", nil, "1449551462"},
		{"2G", nil, "1800000000"},
		{"4096Ki", nil, "3774873"},
		{1073741824, nil, "966367641"},
		{"1Gi", 80, "858993459"},
		{nil, nil, ""},
	} {
		t.Run(fmt.Sprint(tc.limit, "/", tc.percent), func(t *testing.T) {
			values := map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": tc.limit}}}
			if tc.limit == nil {
				values["resources"] = map[string]any{"limits": nil}
			}
			if tc.percent != nil {
				values["goMemLimitPercent"] = tc.percent
			}
			_, c := statefulSet(t, "chute", values)
			got, ok := envValue(c, "GOMEMLIMIT")
			switch {
			case tc.want == "" && ok:
				t.Errorf("no memory limit: GOMEMLIMIT %q, want none", got)
			case tc.want != "" && got != tc.want:
				t.Errorf("limits.memory %v: GOMEMLIMIT %q, want %s", tc.limit, got, tc.want)
			}
			if tc.want == "" {
				return
			}
			limit := c.Resources.Limits.Memory().Value()
			pct := int64(90)
			if tc.percent != nil {
				pct = int64(tc.percent.(int))
			}
			if n, _ := strconv.ParseInt(got, 10, 64); n != limit*pct/100 && n != int64(float64(limit)*float64(pct)/100) {
				t.Errorf("GOMEMLIMIT %s, want %d%% of the rendered limit %d", got, pct, limit)
			}
		})
	}
	for _, bad := range []map[string]any{
		{"resources": map[string]any{"limits": map[string]any{"memory": "1GB"}}},
		{"goMemLimitPercent": 0},
		{"goMemLimitPercent": 101},
	} {
		if _, err := renderErr("chute", bad); err == nil {
			t.Errorf("values %v rendered, want an error", bad)
		}
	}
}

func TestChart_monitors(t *testing.T) {
	for _, tc := range []struct {
		serviceMonitor, prometheusRule bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("serviceMonitor=%v,prometheusRule=%v", tc.serviceMonitor, tc.prometheusRule), func(t *testing.T) {
			ms := render(t, "chute", map[string]any{
				"serviceMonitor": map[string]any{"enabled": tc.serviceMonitor, "labels": map[string]any{"release": "kube-prometheus"}},
				"prometheusRule": map[string]any{"enabled": tc.prometheusRule},
			})
			if got := len(kinds(ms, "ServiceMonitor")); got != map[bool]int{false: 0, true: 1}[tc.serviceMonitor] {
				t.Errorf("%d ServiceMonitors with serviceMonitor.enabled %v", got, tc.serviceMonitor)
			}
			if got := len(kinds(ms, "PrometheusRule")); got != map[bool]int{false: 0, true: 1}[tc.prometheusRule] {
				t.Errorf("%d PrometheusRules with prometheusRule.enabled %v", got, tc.prometheusRule)
			}
			if tc.serviceMonitor {
				checkServiceMonitor(t, ms)
			}
			if tc.prometheusRule {
				checkPrometheusRule(t, only(t, ms, "PrometheusRule"))
			}
		})
	}
}

// checkServiceMonitor: it selects one Service, the headless one (every
// pod, ready or not, scraped once), by the port of the metrics listener.
func checkServiceMonitor(t *testing.T, ms []manifest) {
	t.Helper()
	sm := only(t, ms, "ServiceMonitor")
	if sm.Metadata.Labels["release"] != "kube-prometheus" {
		t.Errorf("ServiceMonitor: labels %v, want serviceMonitor.labels among them", sm.Metadata.Labels)
	}
	var spec struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(sm.doc, &spec); err != nil {
		t.Fatal(err)
	}
	var selected []corev1.Service
	for _, m := range kinds(ms, "Service") {
		if selects(spec.Spec.Selector.MatchLabels, m.Metadata.Labels) {
			selected = append(selected, decode[corev1.Service](t, m))
		}
	}
	if len(selected) != 1 || selected[0].Spec.ClusterIP != "None" {
		t.Fatalf("ServiceMonitor: selector %v selects %d Services, want the headless one alone", spec.Spec.Selector.MatchLabels, len(selected))
	}
	if len(spec.Spec.Endpoints) != 1 || spec.Spec.Endpoints[0].Path != "/metrics" ||
		!slices.ContainsFunc(selected[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == spec.Spec.Endpoints[0].Port && p.Name == "metrics" }) {
		t.Errorf("ServiceMonitor: endpoints %+v, want /metrics on the Service's port metrics", spec.Spec.Endpoints)
	}
}

// checkPrometheusRule: its groups are deploy/monitoring's rules file, and
// load with Prometheus' parser.
func checkPrometheusRule(t *testing.T, m manifest) {
	t.Helper()
	doc := generic(t, m.doc)
	spec, _ := doc["spec"].(map[string]any)
	file := generic(t, readFile(t, rulesFile))
	if !reflect.DeepEqual(spec["groups"], file["groups"]) {
		t.Errorf("PrometheusRule: spec.groups differ from %s", rulesFile)
	}
	text, err := yaml.Marshal(map[string]any{"groups": spec["groups"]})
	if err != nil {
		t.Fatal(err)
	}
	loadRules(t, "PrometheusRule "+m.Metadata.Name, text)
}

// TestChart_persistence: --data-dir is always a writable mount: a claim
// per pod by default, of the size and class asked for, or an emptyDir
// when persistence is off.
func TestChart_persistence(t *testing.T) {
	sts, c := statefulSet(t, "chute", map[string]any{"persistence": map[string]any{"size": "5Gi", "storageClassName": "fast"}})
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("persistence on: %d volumeClaimTemplates, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	pvc := sts.Spec.VolumeClaimTemplates[0]
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "5Gi" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" {
		t.Errorf("volumeClaimTemplate: storage %s, class %v, want 5Gi of fast", got, pvc.Spec.StorageClassName)
	}
	checkDataMount(t, sts, c, pvc.Name)
	if sts.Spec.Template.Spec.SecurityContext.FSGroup == nil {
		t.Error("no fsGroup: the non-root user may not write the volume")
	}
	if _, c := statefulSet(t, "chute", nil); !slices.ContainsFunc(c.Args, func(a string) bool { return a == "--data-dir=/var/lib/chute" }) {
		t.Errorf("defaults: args %v, want --data-dir=/var/lib/chute", c.Args)
	}

	sts, c = statefulSet(t, "chute", map[string]any{"persistence": map[string]any{"enabled": false}})
	if len(sts.Spec.VolumeClaimTemplates) != 0 {
		t.Error("persistence off: want no volumeClaimTemplates")
	}
	var emptyDir string
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.EmptyDir != nil {
			emptyDir = v.Name
		}
	}
	if emptyDir == "" {
		t.Fatal("persistence off: no emptyDir volume for --data-dir")
	}
	checkDataMount(t, sts, c, emptyDir)
}

// checkDataMount: --data-dir is the writable mount of the volume name.
func checkDataMount(t *testing.T, sts appsv1.StatefulSet, c corev1.Container, name string) {
	t.Helper()
	dir, _ := flagValue(c.Args, "data-dir")
	if dir == "" || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name && m.MountPath == dir && !m.ReadOnly }) {
		t.Errorf("--data-dir=%q: want the writable mount of the volume %s", dir, name)
	}
}

// TestChart_raft: the raft settings of the values reach chute.yaml, and
// bootstrapExpect stays apart from replicaCount (a pod added by scaling
// joins the cluster that exists; TestChart_release checks that scaling
// changes nothing else).
func TestChart_raft(t *testing.T) {
	ms := render(t, "chute", map[string]any{"replicaCount": 5, "config": map[string]any{"bootstrapExpect": 5, "raftVoters": 5, "raftDeadServerGrace": "2m"}})
	cfg := generic(t, []byte(decode[corev1.ConfigMap](t, only(t, ms, "ConfigMap")).Data["chute.yaml"]))
	for key, want := range map[string]any{"bootstrap_expect": float64(5), "raft_voters": float64(5), "raft_dead_server_grace": "2m"} {
		if cfg[key] != want {
			t.Errorf("chute.yaml %s: %v, want %v", key, cfg[key], want)
		}
	}
	sts := decode[appsv1.StatefulSet](t, only(t, render(t, "chute", nil), "StatefulSet"))
	cfg = generic(t, []byte(decode[corev1.ConfigMap](t, only(t, render(t, "chute", nil), "ConfigMap")).Data["chute.yaml"]))
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || cfg["bootstrap_expect"] != float64(*sts.Spec.Replicas) {
		t.Errorf("defaults: podManagementPolicy %s, bootstrap_expect %v, replicas %d: want Parallel pods that all bootstrap together",
			sts.Spec.PodManagementPolicy, cfg["bootstrap_expect"], *sts.Spec.Replicas)
	}
}

// TestChart_release: every name follows the release, nothing names a pod,
// and more replicas change nothing but the count.
func TestChart_release(t *testing.T) {
	ms := render(t, "prod", nil)
	for _, m := range ms {
		if !strings.HasPrefix(m.Metadata.Name, "prod-chute") && m.Kind != "Secret" {
			t.Errorf("%s %s: want the name prod-chute...", m.Kind, m.Metadata.Name)
		}
		if regexp.MustCompile(`prod-chute-\d`).Match(m.doc) {
			t.Errorf("%s %s names a pod: scaling would need a change", m.Kind, m.Metadata.Name)
		}
	}
	sts := decode[appsv1.StatefulSet](t, only(t, ms, "StatefulSet"))
	c := sts.Spec.Template.Spec.Containers[0]
	if sts.Spec.ServiceName != "prod-chute-headless" {
		t.Errorf("serviceName %s, want prod-chute-headless", sts.Spec.ServiceName)
	}
	named(t, ms, "Service", sts.Spec.ServiceName)
	cfg := generic(t, []byte(decode[corev1.ConfigMap](t, only(t, ms, "ConfigMap")).Data["chute.yaml"]))
	if cfg["join"] != "prod-chute-headless:7946" {
		t.Errorf("join %v, want the headless Service prod-chute-headless:7946", cfg["join"])
	}
	if v, _ := flagValue(c.Args, "advertise-client-urls"); v != "https://$(CHUTE_NAME).prod-chute-headless.$(POD_NAMESPACE).svc:2379" {
		t.Errorf("--advertise-client-urls=%s, want the pod's name under prod-chute-headless", v)
	}

	five, _ := statefulSet(t, "prod", map[string]any{"replicaCount": 5})
	if *five.Spec.Replicas != 5 {
		t.Errorf("replicaCount 5: replicas %d", *five.Spec.Replicas)
	}
	five.Spec.Replicas = sts.Spec.Replicas
	if !reflect.DeepEqual(five, sts) {
		t.Error("replicaCount 5 changes more than the replica count")
	}
}

func TestChart_ports(t *testing.T) {
	ms := render(t, "chute", map[string]any{"ports": map[string]any{"client": 12379, "peer": 12380, "gossip": 17946, "metrics": 19379}})
	sts := decode[appsv1.StatefulSet](t, only(t, ms, "StatefulSet"))
	c := sts.Spec.Template.Spec.Containers[0]
	cfg := generic(t, []byte(decode[corev1.ConfigMap](t, only(t, ms, "ConfigMap")).Data["chute.yaml"]))
	want := map[string]int32{"client": 12379, "peer": 12380, "gossip-tcp": 17946, "gossip-udp": 17946, "metrics": 19379}
	for _, p := range c.Ports {
		if want[p.Name] != p.ContainerPort {
			t.Errorf("container port %s: %d, want %d", p.Name, p.ContainerPort, want[p.Name])
		}
	}
	for key, port := range map[string]string{"listen_client_urls": "12379", "listen_peer_urls": "12380", "gossip_listen": "17946", "metrics_listen": "19379", "join": "17946"} {
		if v := fmt.Sprint(cfg[key]); !strings.HasSuffix(v, ":"+port) {
			t.Errorf("chute.yaml %s: %s, want port %s", key, v, port)
		}
	}
	for _, f := range []string{"advertise-client-urls", "advertise-peer-urls", "gossip-advertise"} {
		if v, _ := flagValue(c.Args, f); !strings.HasSuffix(v, ":"+map[string]string{"advertise-client-urls": "12379", "advertise-peer-urls": "12380", "gossip-advertise": "17946"}[f]) {
			t.Errorf("--%s=%s: the port does not follow ports", f, v)
		}
	}
	for _, m := range kinds(ms, "Service") {
		for _, p := range decode[corev1.Service](t, m).Spec.Ports {
			if p.Port != want[p.Name] || p.TargetPort.StrVal != p.Name {
				t.Errorf("Service %s port %s: %d to %s, want %d to the container port %s", m.Metadata.Name, p.Name, p.Port, p.TargetPort.String(), want[p.Name], p.Name)
			}
		}
	}
	if got := sts.Spec.Template.Annotations["prometheus.io/port"]; got != "19379" {
		t.Errorf("prometheus.io/port %q, want 19379", got)
	}
}

func TestChart_tlsOff(t *testing.T) {
	ms := render(t, "chute", map[string]any{"tls": map[string]any{"enabled": false}})
	sts := decode[appsv1.StatefulSet](t, only(t, ms, "StatefulSet"))
	c := sts.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if strings.Contains(a, "https://") || strings.Contains(a, "cert") || strings.Contains(a, "key-file") {
			t.Errorf("tls off: argument %s", a)
		}
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			t.Errorf("tls off: the Secret %s is still mounted", v.Secret.SecretName)
		}
	}
	cfg := generic(t, []byte(decode[corev1.ConfigMap](t, only(t, ms, "ConfigMap")).Data["chute.yaml"]))
	for _, key := range []string{"listen_client_urls", "listen_peer_urls"} {
		if v := fmt.Sprint(cfg[key]); !strings.HasPrefix(v, "http://") {
			t.Errorf("tls off: %s %s, want http://", key, v)
		}
	}
}

func TestChart_secret(t *testing.T) {
	if got := kinds(render(t, "chute", nil), "Secret"); len(got) != 0 {
		t.Errorf("secrets.create false: %d Secrets rendered", len(got))
	}
	ms := render(t, "chute", map[string]any{"secrets": map[string]any{"create": true, "clickhouseUrl": "http://u:p@clickhouse:8123", "gossipKey": "a2V5"}})
	sec := decode[corev1.Secret](t, only(t, ms, "Secret"))
	c := decode[appsv1.StatefulSet](t, only(t, ms, "StatefulSet")).Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			if ref.SecretKeyRef.Name != sec.Name || sec.StringData[ref.SecretKeyRef.Key] == "" {
				t.Errorf("env %s: Secret %s key %s, the rendered Secret %s holds %v", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, sec.Name, sec.StringData)
			}
		}
	}
	cm := only(t, ms, "ConfigMap")
	if bytes.Contains(cm.doc, []byte("u:p@")) {
		t.Error("the ClickHouse password is in the ConfigMap")
	}
	if _, err := renderErr("chute", map[string]any{"secrets": map[string]any{"create": true}}); err == nil {
		t.Error("secrets.create without clickhouseUrl rendered, want an error")
	}
}
