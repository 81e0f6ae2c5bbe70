package bench

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	opts, err := parseFlags([]string{
		"--endpoints", "http://127.0.0.1:2379, 127.0.0.1:2380", "--clients", "8", "--conns", "3",
		"--puts", "500", "--duration", "2s", "--key-size", "32", "--val-size", "10", "--warmup", "0", "--json",
	}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	want := DefaultConfig()
	want.Endpoints = []string{"http://127.0.0.1:2379", "127.0.0.1:2380"}
	want.Clients, want.Conns, want.Puts, want.Duration = 8, 3, 500, 2*time.Second
	want.KeySize, want.ValSize, want.Warmup = 32, 10, 0
	if !reflect.DeepEqual(opts.cfg, want) {
		t.Errorf("config: got %+v, want %+v", opts.cfg, want)
	}
	if !opts.json || opts.matrix || opts.label != "http://127.0.0.1:2379,127.0.0.1:2380" {
		t.Errorf("options: got json=%v matrix=%v label=%q", opts.json, opts.matrix, opts.label)
	}
}

func TestParseFlags_matrix(t *testing.T) {
	opts, err := parseFlags([]string{"--matrix", "--matrix-clients", "1, 10,100", "--node-args", "--data-dir x"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if opts.trace {
		t.Errorf("trace: got true, want false without --trace")
	}
	if !reflect.DeepEqual(opts.matrixClients, []int{1, 10, 100}) {
		t.Errorf("matrix clients: got %v, want [1 10 100]", opts.matrixClients)
	}
	if !reflect.DeepEqual(opts.nodeArgs, []string{"--data-dir", "x"}) {
		t.Errorf("node args: got %q, want [--data-dir x]", opts.nodeArgs)
	}
}

func TestParseFlags_trace(t *testing.T) {
	opts, err := parseFlags([]string{"--matrix", "--trace"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if !opts.trace {
		t.Errorf("trace: got false, want true")
	}
}

func TestParseFlags_errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"nothing", nil},
		{"both modes", []string{"--matrix", "--endpoints", "127.0.0.1:1"}},
		{"zero clients", []string{"--endpoints", "127.0.0.1:1", "--clients", "0"}},
		{"bad matrix clients", []string{"--matrix", "--matrix-clients", "1,x"}},
		{"empty matrix clients", []string{"--matrix", "--matrix-clients", ","}},
		{"stray argument", []string{"--endpoints", "127.0.0.1:1", "extra"}},
		{"unknown flag", []string{"--nope"}},
		{"trace without matrix", []string{"--endpoints", "127.0.0.1:1", "--trace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseFlags(tt.args, io.Discard); err == nil {
				t.Errorf("parseFlags(%q): got nil error, want one", tt.args)
			}
		})
	}
}

func TestParseFlags_help(t *testing.T) {
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h): got %v, want flag.ErrHelp", err)
	}
}
