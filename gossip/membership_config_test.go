package gossip

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func validTestConfig() Config {
	c := DefaultConfig()
	c.Name = "node-1"
	c.Cluster = "chute"
	return c
}

func TestConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string // "" means valid
	}{
		{"default with name and cluster", func(*Config) {}, ""},
		{"all set", func(c *Config) {
			c.BindAddr = "0.0.0.0:7946"
			c.AdvertiseAddr = "node-1.example.com:7946"
			c.Join = []string{"10.0.0.2:7946", "chute-0.chute:7946", "[::1]:7946"}
			c.Key = make([]byte, 32)
			c.PeerURLs = []string{"http://10.0.0.1:2380"}
			c.ClientURLs = []string{"http://10.0.0.1:2379", "http://127.0.0.1:2379"}
			c.Version = "1.2.3"
		}, ""},
		{"bind on every interface", func(c *Config) { c.BindAddr = ":7946" }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "name"},
		{"name with space", func(c *Config) { c.Name = "a b" }, "name"},
		{"name with slash", func(c *Config) { c.Name = "a/b" }, "name"},
		{"name too long", func(c *Config) { c.Name = strings.Repeat("n", 129) }, "name"},
		{"no cluster", func(c *Config) { c.Cluster = "" }, "cluster"},
		{"cluster too long", func(c *Config) { c.Cluster = strings.Repeat("c", 256) }, "cluster"},
		{"no bind", func(c *Config) { c.BindAddr = "" }, "bind"},
		{"bind without port", func(c *Config) { c.BindAddr = "127.0.0.1" }, "bind"},
		{"bind port 0", func(c *Config) { c.BindAddr = "127.0.0.1:0" }, "port 0"},
		{"bind port too big", func(c *Config) { c.BindAddr = "127.0.0.1:65536" }, "bind"},
		{"advertise without host", func(c *Config) { c.AdvertiseAddr = ":7946" }, "advertise"},
		{"seed without port", func(c *Config) { c.Join = []string{"10.0.0.2"} }, "join"},
		{"seed without host", func(c *Config) { c.Join = []string{":7946"} }, "join"},
		{"empty seed", func(c *Config) { c.Join = []string{""} }, "join"},
		{"negative backoff", func(c *Config) { c.JoinBackoffMin = -time.Second }, "backoff"},
		{"backoff min above max", func(c *Config) { c.JoinBackoffMin, c.JoinBackoffMax = 2*time.Second, time.Second }, "backoff"},
		{"backoff min above default max", func(c *Config) { c.JoinBackoffMin, c.JoinBackoffMax = time.Minute, 0 }, ""},
		{"key of 20 bytes", func(c *Config) { c.Key = make([]byte, 20) }, "key"},
		{"url with comma", func(c *Config) { c.PeerURLs = []string{"http://a,b"} }, "url"},
		{"empty url", func(c *Config) { c.ClientURLs = []string{""} }, "url"},
		{"tags too large", func(c *Config) {
			for range 10 {
				c.ClientURLs = append(c.ClientURLs, "http://"+strings.Repeat("h", 50)+":2379")
			}
		}, "tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTestConfig()
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("got nil, want an error about %q", tc.wantErr)
			case err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want ErrInvalidConfig about %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfig_tags(t *testing.T) {
	c := validTestConfig()
	c.PeerURLs = []string{"http://a:2380"}
	c.ClientURLs = []string{"http://a:2379", "http://b:2379"}
	c.Version = "v9"
	c.Started = time.UnixMilli(1700000000123)
	got := c.tags()
	want := map[string]string{
		"cluster": "chute",
		"id":      "", // checked below
		"peer":    "http://a:2380",
		"client":  "http://a:2379,http://b:2379",
		"version": "v9",
		"boot":    "",
		"started": "1700000000123",
	}
	for k, v := range want {
		if k != "id" && got[k] != v {
			t.Errorf("tag %q: got %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d tags, want %d: %v", len(got), len(want), got)
	}
	if id, err := strconv.ParseUint(got["id"], 16, 64); err != nil || id != MemberID("node-1") {
		t.Errorf("id tag %q, want %x", got["id"], MemberID("node-1"))
	}
}

func TestNew_invalidConfig(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(Config{}): got %v, want ErrInvalidConfig", err)
	}
}

func TestStatus_String(t *testing.T) {
	for s, want := range map[Status]string{
		StatusAlive: "alive", StatusLeaving: "leaving", StatusLeft: "left", StatusFailed: "failed", 0: "unknown",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d): got %q, want %q", int(s), got, want)
		}
	}
	for e, want := range map[EventType]string{
		EventJoin: "join", EventLeave: "leave", EventFailed: "failed", EventUpdate: "update", EventReap: "reap", 0: "unknown",
	} {
		if got := e.String(); got != want {
			t.Errorf("EventType(%d): got %q, want %q", int(e), got, want)
		}
	}
}
