package sink

import (
	"errors"
	"strings"
	"testing"

	"chute/internal/testcerts"
)

func TestConfig_Validate_cases(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "clickhouse CA")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Issue(t, "chute", "localhost").Write(t, dir, "client")
	tests := []struct {
		name      string
		mutate    func(c *Config)
		wantField string // "" for valid
		wantErr   string
	}{
		{"defaults", func(c *Config) {}, "", ""},
		{"http URL", func(c *Config) { c.URL = "http://u:p@h:8123" }, "", ""},
		{"bare host", func(c *Config) { c.URL = "h" }, "", ""},
		{"https with files", func(c *Config) {
			c.URL, c.CAFile, c.CertFile, c.KeyFile, c.ServerName = "https://h", caFile, cert, key, "ch"
		}, "", ""},
		{"port 0", func(c *Config) { c.URL = "http://h:0" }, "URL", "port: want 1-65535"},
		{"port too big", func(c *Config) { c.URL = "http://h:65536" }, "URL", "1-65535"},
		{"scheme", func(c *Config) { c.URL = "tcp://h:9000" }, "URL", "scheme"},
		{"no host", func(c *Config) { c.URL = "http://:8123" }, "URL", "no host"},
		{"empty database", func(c *Config) { c.Database = "" }, "Database", "must not be empty"},
		{"CA over http", func(c *Config) { c.URL, c.CAFile = "http://h", caFile }, "CAFile", "https"},
		{"server name without URL", func(c *Config) { c.ServerName = "ch" }, "ServerName", "https"},
		{"cert without key", func(c *Config) { c.URL, c.CertFile = "https://h", cert }, "CertFile", "key"},
		{"key without cert", func(c *Config) { c.URL, c.KeyFile = "https://h", key }, "KeyFile", "certificate"},
		{"key that does not match", func(c *Config) { c.URL, c.CertFile, c.KeyFile = "https://h", cert, caFile }, "CertFile", cert},
		{"CA missing", func(c *Config) { c.URL, c.CAFile = "https://h", dir+"/none" }, "CAFile", "none"},
		{"CA not PEM", func(c *Config) { c.URL, c.CAFile = "https://h", key }, "CAFile", "no PEM certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want field %s and %q", err, tc.wantField, tc.wantErr)
			}
		})
	}
}

func TestConfig_Validate_hidesPassword(t *testing.T) {
	for _, u := range []string{"http://u:s3cret@h:0", "ftp://u:s3cret@h:1", "http://u:s3cret@[::1"} {
		c := DefaultConfig()
		c.URL = u
		if err := c.Validate(); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("URL %q: got %v, want an error without the password", u, err)
		}
	}
}

func TestConfig_TLSConfig_none(t *testing.T) {
	got, err := Config{URL: "https://h"}.TLSConfig()
	if got != nil || err != nil {
		t.Fatalf("got %v, %v; want nil, nil", got, err)
	}
}
