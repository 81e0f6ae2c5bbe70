package bench

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
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

func TestMain_refusedServer(t *testing.T) {
	var stdout strings.Builder
	code := Main([]string{"--endpoints", refusedAddr(t), "--clients", "2", "--puts", "10", "--dial-timeout", "300ms"}, &stdout, io.Discard)
	if code != 1 {
		t.Errorf("Main: got exit %d, want 1", code)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: got %q, want nothing", stdout.String())
	}
}

func TestMain_usage(t *testing.T) {
	for _, args := range [][]string{nil, {"--clients", "-1"}, {"noop-server", "extra"}} {
		if code := Main(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("Main(%q): got exit %d, want 2", args, code)
		}
	}
	if code := Main([]string{"-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("Main(-h): got exit %d, want 0", code)
	}
}
