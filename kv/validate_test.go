package kv

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc/credentials/insecure"
)

func TestConfig_Validate_cases(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(c *Config)
		wantField string // "" for valid
		wantErr   string
	}{
		{"defaults", func(c *Config) {}, "", ""},
		{"bcrypt cost at its bounds", func(c *Config) { c.BcryptCost = bcrypt.MaxCost }, "", ""},
		{"bcrypt cost too high", func(c *Config) { c.BcryptCost = bcrypt.MaxCost + 1 }, "BcryptCost", "outside"},
		{"bcrypt cost too low", func(c *Config) { c.BcryptCost = bcrypt.MinCost - 1 }, "BcryptCost", "outside"},
		{"listen port 0", func(c *Config) { c.ListenClientURLs = []string{"http://127.0.0.1:0"} }, "", ""},
		{"listen IPv6 with slash", func(c *Config) { c.ListenClientURLs = []string{"http://[::1]:2379/"} }, "", ""},
		{"https with TLS", func(c *Config) {
			c.ListenClientURLs = []string{"https://127.0.0.1:2379"}
			c.TLS = insecure.NewCredentials()
		}, "", ""},
		{"https without TLS", func(c *Config) { c.ListenClientURLs = []string{"https://127.0.0.1:2379"} }, "TLS", "needs a certificate"},
		{"listen scheme", func(c *Config) { c.ListenClientURLs = []string{"unix://sock"} }, "ListenClientURLs", "scheme must be http or https"},
		{"listen no port", func(c *Config) { c.ListenClientURLs = []string{"http://h"} }, "ListenClientURLs", "want host:port"},
		{"listen no scheme", func(c *Config) { c.ListenClientURLs = []string{"127.0.0.1:2379"} }, "ListenClientURLs", "not a URL"},
		{"listen empty host", func(c *Config) { c.ListenClientURLs = []string{"http://:2379"} }, "ListenClientURLs", "host is empty"},
		{"listen path", func(c *Config) { c.ListenClientURLs = []string{"http://h:1/x"} }, "ListenClientURLs", "path"},
		{"listen user", func(c *Config) { c.ListenClientURLs = []string{"http://u:p@h:1"} }, "ListenClientURLs", "must not contain a user"},
		{"listen port too big", func(c *Config) { c.ListenClientURLs = []string{"http://h:65536"} }, "ListenClientURLs", "0 to 65535"},
		{"advertise copied from a listen port 0", func(c *Config) { c.AdvertiseClientURLs = []string{"http://127.0.0.1:0"} }, "", ""},
		{"advertise client scheme", func(c *Config) { c.AdvertiseClientURLs = []string{"grpc://10.0.0.1:1"} }, "AdvertiseClientURLs", "scheme"},
		{"advertise peer path", func(c *Config) { c.AdvertisePeerURLs = []string{"http://10.0.0.1:1/p"} }, "AdvertisePeerURLs", "path"},
		{"advertise peer ok", func(c *Config) { c.AdvertisePeerURLs = []string{"https://10.0.0.1:2380"} }, "", ""},
		{"negative txn ops", func(c *Config) { c.MaxTxnOps = -1 }, "MaxTxnOps", "-1 is negative"},
		{"negative request bytes", func(c *Config) { c.MaxRequestBytes = -1 }, "MaxRequestBytes", "negative"},
		{"negative history", func(c *Config) { c.HistoryRevisions = -1 }, "HistoryRevisions", "negative"},
		{"zero limits mean defaults", func(c *Config) { c.MaxTxnOps, c.MaxKeyBytes, c.MaxRequestBytes = 0, 0, 0 }, "", ""},
		{"negative interval", func(c *Config) { c.LeaseCheckInterval = -time.Second }, "LeaseCheckInterval", "negative"},
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
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got field %q error %q, want field %q and %q", fe.Field, err, tc.wantField, tc.wantErr)
			}
		})
	}
}

func TestConfig_Validate_reportsEveryField(t *testing.T) {
	c := DefaultConfig()
	c.MaxTxnOps, c.MaxKeyBytes = -1, -2
	c.ListenClientURLs = []string{"ftp://h:1"}
	err := c.Validate()
	for _, w := range []string{"MaxTxnOps", "MaxKeyBytes", "ListenClientURLs"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("got %v, want it to name %s", err, w)
		}
	}
}

func TestConfig_Validate_hidesPassword(t *testing.T) {
	c := DefaultConfig()
	c.AdvertiseClientURLs = []string{"http://u:s3cret@h:1"}
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v, want an error without the password", err)
	}
}

func TestNew_Validate_refusesInvalid(t *testing.T) {
	c := DefaultConfig()
	c.ListenClientURLs = []string{"https://127.0.0.1:0"}
	if _, err := New(c); err == nil {
		t.Fatal("New with an https URL and no TLS: got nil, want an error")
	}
}
