package bench

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"chute/internal/testutil"
)

func TestMain_endpointsJSON(t *testing.T) {
	addr := startNoop(t)
	var stdout, stderr strings.Builder
	code := Main([]string{"--endpoints", addr, "--clients", "3", "--conns", "2", "--puts", "300", "--warmup", "10", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("Main: got exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 1 || rep.Results[0].Puts != 300 || rep.Results[0].Server != addr {
		t.Errorf("report: got %+v, want one result of 300 puts labelled %s", rep.Results, addr)
	}
}

// TestMain_report writes the report document of a single run, in txns.
func TestMain_report(t *testing.T) {
	addr := startNoop(t)
	path := filepath.Join(t.TempDir(), "bench.md")
	var stdout, stderr strings.Builder
	args := []string{"--endpoints", addr, "--clients", "3", "--conns", "2", "--puts", "320", "--warmup", "0", "--txn", "32",
		"--report", path, "--commit", "abc123"}
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("Main: got exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	for _, want := range []string{"# Benchmarks", "| chute built from | abc123 |", "chute-bench --endpoints " + addr,
		"| " + addr + " | txn 32 | 3 | 2 | - |", "## How it was measured"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	if !strings.Contains(stdout.String(), "| "+addr+" | txn 32 |") {
		t.Errorf("stdout: got %q, want the table", stdout.String())
	}
	if strings.Contains(stderr.String(), "\r") {
		t.Errorf("stderr: got a progress line without --progress or a terminal:\n%q", stderr.String())
	}
}

func TestMain_progressFlag(t *testing.T) {
	addr := startNoop(t)
	var stdout, stderr strings.Builder
	code := Main([]string{"--endpoints", addr, "--clients", "2", "--puts", "200", "--warmup", "0", "--progress"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("Main: got exit %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "\r"+addr+" [") {
		t.Errorf("stderr: got %q, want a progress line", stderr.String())
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"--matrix", "--commit", "abc with local changes", "--x=it's", "", "--url=http://a:1/b"})
	want := `chute-bench --matrix --commit 'abc with local changes' '--x=it'\''s' '' --url=http://a:1/b`
	if got != want {
		t.Errorf("commandLine: got %s, want %s", got, want)
	}
}

func TestChuteBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "chute-bench")
	beside := filepath.Join(dir, "chute")
	onPath := func(string) (string, error) { return "/on/path/chute", nil }
	nowhere := func(string) (string, error) { return "", exec.ErrNotFound }

	if got, err := chuteBinary("/given/chute", self, nowhere); err != nil || got != "/given/chute" {
		t.Errorf("given: got %q, %v, want /given/chute", got, err)
	}
	if got, err := chuteBinary("", self, onPath); err != nil || got != "/on/path/chute" {
		t.Errorf("none beside: got %q, %v, want /on/path/chute", got, err)
	}
	if _, err := chuteBinary("", self, nowhere); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("none anywhere: got %v, want exec.ErrNotFound", err)
	}
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := chuteBinary("", self, onPath); err != nil || got != beside {
		t.Errorf("beside: got %q, %v, want %s", got, err, beside)
	}
	t.Chdir(dir)
	if got, err := chuteBinary("bin/chute", self, nowhere); err != nil || got != filepath.Join(dir, "bin", "chute") {
		t.Errorf("relative: got %q, %v, want it under %s", got, err, dir)
	}
	if got, err := chuteBinary("chute", self, nowhere); err != nil || got != "chute" {
		t.Errorf("bare name: got %q, %v, want chute, for PATH", got, err)
	}
}

func TestMain_refusedServer(t *testing.T) {
	var stdout strings.Builder
	code := Main([]string{"--endpoints", testutil.FreeAddr(t), "--clients", "2", "--puts", "10", "--dial-timeout", "300ms"}, &stdout, io.Discard)
	if code != 1 {
		t.Errorf("Main: got exit %d, want 1", code)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: got %q, want nothing", stdout.String())
	}
}

func TestMain_usage(t *testing.T) {
	for _, args := range [][]string{nil, {"--clients", "-1"}, {"noop-server", "extra"}, {"--endpoints", "127.0.0.1:1", "--chute", "x"}} {
		if code := Main(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("Main(%q): got exit %d, want 2", args, code)
		}
	}
	if code := Main([]string{"-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("Main(-h): got exit %d, want 0", code)
	}
}
