package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRun_noopServer(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Puts != int64(cfg.Puts) {
		t.Errorf("puts: got %d, want %d", r.Puts, cfg.Puts)
	}
	if r.Errors != 0 || r.FirstError != "" {
		t.Errorf("errors: got %d (%q), want 0", r.Errors, r.FirstError)
	}
	if r.PutsPerSec <= 0 {
		t.Errorf("puts/s: got %v, want > 0", r.PutsPerSec)
	}
	if r.P50 <= 0 || r.P50 > r.P99 {
		t.Errorf("percentiles: got p50 %v p99 %v, want 0 < p50 <= p99", r.P50, r.P99)
	}
	if r.Clients != 4 || r.Conns != 2 || r.KeySize != cfg.KeySize || r.ValSize != cfg.ValSize {
		t.Errorf("shape: got %+v, want 4 clients, 2 conns, sizes %d/%d", r, cfg.KeySize, cfg.ValSize)
	}
	if r.Elapsed <= 0 {
		t.Errorf("elapsed: got %v, want > 0", r.Elapsed)
	}
}

func TestRun_connsCappedAtClients(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Clients, cfg.Conns, cfg.Puts, cfg.Warmup = 2, 10, 100, 0
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Conns != 2 {
		t.Errorf("conns: got %d, want 2", r.Conns)
	}
}

func TestRun_refusedServer(t *testing.T) {
	cfg := smallConfig(refusedAddr(t))
	cfg.DialTimeout = 500 * time.Millisecond
	start := time.Now()
	_, err := Run(testContext(t), cfg)
	if err == nil {
		t.Fatal("Run: got nil error, want one for a refused server")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v, want it to fail within the dial timeout", d)
	}
}

func TestRun_durationCap(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Puts = maxPuts
	cfg.Warmup = 0
	cfg.Duration = 200 * time.Millisecond
	start := time.Now()
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v, want about %v", d, cfg.Duration)
	}
	if r.Puts <= 0 || r.Puts >= int64(cfg.Puts) {
		t.Errorf("puts: got %d, want some but not all %d", r.Puts, cfg.Puts)
	}
}

func TestRun_cancelled(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Puts = maxPuts
	ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: got %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

func TestRun_invalidConfig(t *testing.T) {
	_, err := Run(testContext(t), Config{})
	if err == nil {
		t.Fatal("Run: got nil error, want a validation error")
	}
}

func TestConfig_Validate(t *testing.T) {
	valid := smallConfig("127.0.0.1:1")
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, false},
		{"empty endpoint", func(c *Config) { c.Endpoints = []string{""} }, false},
		{"zero clients", func(c *Config) { c.Clients = 0 }, false},
		{"zero conns", func(c *Config) { c.Conns = 0 }, false},
		{"zero puts", func(c *Config) { c.Puts = 0 }, false},
		{"too many puts", func(c *Config) { c.Puts = maxPuts + 1 }, false},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, false},
		{"zero key size", func(c *Config) { c.KeySize = 0 }, false},
		{"empty values", func(c *Config) { c.ValSize = 0 }, true},
		{"negative warmup", func(c *Config) { c.Warmup = -1 }, false},
		{"zero put timeout", func(c *Config) { c.PutTimeout = 0 }, false},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mutate(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate: got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
