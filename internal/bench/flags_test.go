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

func TestParseFlags_repeat(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--matrix"}, 1},
		{[]string{"--matrix", "--repeat", "3"}, 3},
		{[]string{"--endpoints", "127.0.0.1:1", "--repeat", "1"}, 1},
	} {
		opts, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tt.args, err)
		}
		if opts.repeat != tt.want {
			t.Errorf("parseFlags(%q): got repeat %d, want %d", tt.args, opts.repeat, tt.want)
		}
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
		{"txn too large", []string{"--endpoints", "127.0.0.1:1", "--txn", "129"}},
		{"queues without clickhouse", []string{"--endpoints", "127.0.0.1:1", "--queues", "1"}},
		{"too many queues", []string{"--endpoints", "127.0.0.1:1", "--queues", "65", "--clickhouse-url", "http://ch"}},
		{"clickhouse without queues", []string{"--endpoints", "127.0.0.1:1", "--clickhouse-url", "http://ch"}},
		{"claim without queues", []string{"--endpoints", "127.0.0.1:1", "--claim", "127.0.0.1:2"}},
		{"claim with matrix", []string{"--matrix", "--clickhouse-url", "http://ch", "--queues", "1", "--claim", "127.0.0.1:2"}},
		{"rate with the clickhouse matrix", []string{"--matrix", "--clickhouse-url", "http://ch", "--rate", "100"}},
		{"negative rate", []string{"--endpoints", "127.0.0.1:1", "--rate", "-1"}},
		{"zero raw posters", []string{"--matrix", "--clickhouse-url", "http://ch", "--raw-posters", "0"}},
		{"zero repeats", []string{"--matrix", "--repeat", "0"}},
		{"too many repeats", []string{"--matrix", "--repeat", "10"}},
		{"repeat without matrix", []string{"--endpoints", "127.0.0.1:1", "--repeat", "3"}},
		{"unknown compression", []string{"--matrix", "--clickhouse-url", "http://ch", "--compression-cells", "none,brotli"}},
		{"compression twice", []string{"--matrix", "--clickhouse-url", "http://ch", "--compression-cells", "gzip,none,gzip"}},
		{"negative clickhouse pid", []string{"--matrix", "--clickhouse-url", "http://ch", "--clickhouse-pid", "-1"}},
		{"clickhouse pid without clickhouse", []string{"--matrix", "--clickhouse-pid", "7"}},
		{"clickhouse pid without matrix", []string{"--endpoints", "127.0.0.1:1", "--queues", "1", "--clickhouse-url", "http://ch", "--clickhouse-pid", "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseFlags(tt.args, io.Discard); err == nil {
				t.Errorf("parseFlags(%q): got nil error, want one", tt.args)
			}
		})
	}
}

func TestParseFlags_queues(t *testing.T) {
	opts, err := parseFlags([]string{
		"--endpoints", "127.0.0.1:1,127.0.0.1:2", "--queues", "4", "--clickhouse-url", "http://ch:8123", "--txn", "128",
		"--rate", "5000", "--claim", "127.0.0.1:3", "--land-timeout", "1m", "--progress", "--report", "out.md", "--commit", "abc",
	}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if opts.queues != 4 || opts.clickhouseURL != "http://ch:8123" || opts.claim != "127.0.0.1:3" || !opts.progress ||
		opts.report != "out.md" || opts.commit != "abc" {
		t.Errorf("options: got %+v", opts)
	}
	if opts.cfg.Txn != 128 || opts.cfg.Rate != 5000 || opts.cfg.LandTimeout != time.Minute {
		t.Errorf("config: got txn %d rate %v land timeout %v", opts.cfg.Txn, opts.cfg.Rate, opts.cfg.LandTimeout)
	}
	m, err := parseFlags([]string{"--matrix", "--clickhouse-url", "http://ch:8123", "--raw-posters", "4", "--queues", "2"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(matrix): %v", err)
	}
	if m.rawPosters != 4 || m.queues != 2 || m.clickhouseURL == "" {
		t.Errorf("matrix options: got %+v", m)
	}
}

func TestParseFlags_compressionCells(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--matrix", "--clickhouse-url", "http://ch"}, []string{"none", "gzip"}},
		{[]string{"--matrix", "--clickhouse-url", "http://ch", "--compression-cells", " gzip, deflate ,none"}, []string{"gzip", "deflate", "none"}},
		{[]string{"--matrix", "--clickhouse-url", "http://ch", "--compression-cells", ""}, nil},
	} {
		opts, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tt.args, err)
		}
		if !reflect.DeepEqual(opts.compression, tt.want) {
			t.Errorf("parseFlags(%q): got compression cells %q, want %q", tt.args, opts.compression, tt.want)
		}
		if got := docSettingsOf(opts).compression; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("docSettingsOf(%q): got compression %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestParseFlags_help(t *testing.T) {
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h): got %v, want flag.ErrHelp", err)
	}
}

func TestParseFlags_clickhousePID(t *testing.T) {
	opts, err := parseFlags([]string{"--matrix", "--clickhouse-url", "http://ch", "--clickhouse-pid", "4242"}, io.Discard)
	if err != nil || opts.clickhousePID != 4242 {
		t.Errorf("parseFlags: got pid %d, %v; want 4242", opts.clickhousePID, err)
	}
	if opts, err := parseFlags([]string{"--matrix", "--clickhouse-url", "http://ch"}, io.Discard); err != nil || opts.clickhousePID != 0 {
		t.Errorf("parseFlags without it: got pid %d, %v; want 0, found by port", opts.clickhousePID, err)
	}
}
