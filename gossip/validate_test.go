package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfig_Validate_fields(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(c *Config)
		wantField string
	}{
		{"no name", func(c *Config) { c.Name = "" }, "Name"},
		{"no cluster", func(c *Config) { c.Cluster = "" }, "Cluster"},
		{"bind port 0", func(c *Config) { c.BindAddr = "127.0.0.1:0" }, "BindAddr"},
		{"bind not host:port", func(c *Config) { c.BindAddr = "7946" }, "BindAddr"},
		{"advertise port 0", func(c *Config) { c.AdvertiseAddr = "10.0.0.1:0" }, "AdvertiseAddr"},
		{"advertise without host", func(c *Config) { c.AdvertiseAddr = ":7946" }, "AdvertiseAddr"},
		{"seed port 0", func(c *Config) { c.Join = []string{"10.0.0.2:0"} }, "Join"},
		{"negative backoff", func(c *Config) { c.JoinBackoffMax = -time.Second }, "JoinBackoffMin"},
		{"short key", func(c *Config) { c.Key = make([]byte, 8) }, "Key"},
		{"client url with comma", func(c *Config) { c.ClientURLs = []string{"http://a:1,b:2"} }, "ClientURLs"},
		{"start tag of its own", func(c *Config) { c.Tags = map[string]string{"boot": "x"} }, "Tags"},
		{"no room for tags published later", func(c *Config) {
			c.ClientURLs = []string{"http://" + strings.Repeat("h", 380) + ":2379"}
			c.ReserveTags = map[string]string{"later": strings.Repeat("x", 100)}
		}, "PeerURLs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Name, c.Cluster = "n1", "c"
			tc.mutate(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want a *FieldError wrapping ErrInvalidConfig", err)
			}
			if fe.Field != tc.wantField {
				t.Fatalf("got field %q (%v), want %q", fe.Field, err, tc.wantField)
			}
		})
	}
}

// TestConfig_Validate_reserveFits: URLs about as long as the case
// above's fit without the reserved tags.
func TestConfig_Validate_reserveFits(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Cluster = "n1", "c"
	c.ClientURLs = []string{"http://" + strings.Repeat("h", 360) + ":2379"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfig_Validate_reportsEveryField(t *testing.T) {
	c := DefaultConfig()
	c.BindAddr = "127.0.0.1:0"
	err := c.Validate()
	for _, w := range []string{"name", "cluster must not be empty", "port 0"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("got %v, want it to contain %q", err, w)
		}
	}
}
