//go:build e2e

package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"chute/internal/testcerts"
)

// sentinel is an invalid flag appended to a command line: chute checks
// every setting before it binds anything and reports each invalid one,
// so an exit that names this flag alone proves the rest valid.
const (
	sentinel      = "--max-key-bytes=0"
	sentinelError = "chute: --max-key-bytes: 0 is not positive"
	runTimeout    = 15 * time.Second
)

// helpFlags returns chute's own flags from chute --help.
func helpFlags(t testing.TB, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("chute --help: %v", err)
	}
	own := map[string]bool{}
	ownLine := regexp.MustCompile(`^  --([a-z0-9-]+)`)
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "Flags accepted for etcd compatibility") {
			break // etcd's flags, ignored or refused, follow chute's own
		}
		if m := ownLine.FindStringSubmatch(line); m != nil {
			own[m[1]] = true
		}
	}
	if !own["config"] || !own["cert-file"] || !own["data-dir"] {
		t.Fatalf("chute --help did not parse:\n%s", out)
	}
	return own
}

// TestChart_loads runs chute with the chart's rendered arguments,
// environment and config file (the Secret's files and the pod's values
// filled in here): every flag is one of chute --help and the
// configuration loads.
func TestChart_loads(t *testing.T) {
	bin := buildChute(t)
	own := helpFlags(t, bin)
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"defaults", nil},
		{"tls off, no persistence", map[string]any{"tls": map[string]any{"enabled": false}, "persistence": map[string]any{"enabled": false}}},
		{"other ports", map[string]any{"ports": map[string]any{"client": 12379, "peer": 12380, "gossip": 17946, "metrics": 19379}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "chute", tc.values)
			sts := decode[appsv1.StatefulSet](t, only(t, ms, "StatefulSet"))
			c := sts.Spec.Template.Spec.Containers[0]
			for _, a := range c.Args {
				if name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); !own[name] {
					t.Errorf("argument %s: --%s is not a flag of chute --help", a, name)
				}
			}
			args, env := podCommandLine(t, ms, sts, c)
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(args, sentinel)...)
			cmd.Env = env
			cmd.Dir = t.TempDir() // whatever a failure writes stays out of the repository
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("got %v, want exit status 2 (a usage error); output:\n%s", err, out.String())
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); first != sentinelError {
				t.Errorf("the chart's configuration does not load:\n%s\nwant only %q", out.String(), sentinelError)
			}
		})
	}
}

// podCommandLine returns the arguments and environment the kubelet would
// give chute in pod chute-0, with the pod's files (the ConfigMap, the TLS
// Secret, the volume) written under a temporary directory.
func podCommandLine(t *testing.T, ms []manifest, sts appsv1.StatefulSet, c corev1.Container) ([]string, []string) {
	t.Helper()
	dir := t.TempDir()
	mounts := map[string]string{} // path in the pod -> path here
	for _, m := range c.VolumeMounts {
		local := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = local
		for _, v := range sts.Spec.Template.Spec.Volumes {
			switch {
			case v.Name != m.Name:
			case v.ConfigMap != nil:
				cm := decode[corev1.ConfigMap](t, named(t, ms, "ConfigMap", v.ConfigMap.Name))
				for k, data := range cm.Data {
					if err := os.WriteFile(filepath.Join(local, k), []byte(data), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			case v.Secret != nil:
				// cert-manager's layout: ca.crt, tls.crt, tls.key.
				ca := testcerts.NewCA(t, "chute-ca")
				pair := ca.Issue(t, "chute", "localhost", "127.0.0.1")
				for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM} {
					if err := os.WriteFile(filepath.Join(local, name), data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	localize := func(s string) string {
		for from, to := range mounts {
			if s == from || strings.HasPrefix(s, from+"/") || strings.Contains(s, "="+from) {
				s = strings.Replace(s, from, to, 1)
			}
		}
		return s
	}
	vars := map[string]string{}
	env := []string{"OTEL_TRACES_SAMPLER=always_off"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHUTE_") && !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil:
				v = map[string]string{"metadata.name": sts.Name + "-0", "status.podIP": "127.0.0.1", "metadata.namespace": "default"}[f.FieldRef.FieldPath]
				if v == "" {
					t.Fatalf("env %s: fieldRef %s", e.Name, f.FieldRef.FieldPath)
				}
			case f.SecretKeyRef != nil && f.SecretKeyRef.Key == "clickhouse-url":
				v = "http://user:password@127.0.0.1:1"
			case f.SecretKeyRef != nil && ptrTrue(f.SecretKeyRef.Optional):
				continue
			default:
				t.Fatalf("env %s: a source the test does not know", e.Name)
			}
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+localize(v))
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		a = expand.ReplaceAllStringFunc(a, func(m string) string { return vars[m[2:len(m)-1]] })
		args = append(args, localize(a))
	}
	if cfg, ok := flagValue(args, "config"); !ok || !strings.HasPrefix(cfg, dir) || path.Base(cfg) != "chute.yaml" {
		t.Fatalf("--config=%s: not a file of a mounted ConfigMap", cfg)
	}
	return args, env
}
