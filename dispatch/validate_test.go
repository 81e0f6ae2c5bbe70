package dispatch

import (
	"errors"
	"testing"
	"time"
)

func TestConfig_Validate_cases(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(c *Config)
		wantField string // "" for valid
	}{
		{"member id only", func(c *Config) {}, ""},
		{"retry min below default max", func(c *Config) { c.RetryMin = time.Second }, ""},
		{"no member id", func(c *Config) { c.MemberID = 0 }, "MemberID"},
		{"negative prefetch", func(c *Config) { c.Prefetch = -1 }, "Prefetch"},
		{"negative batch bytes", func(c *Config) { c.BatchBytes = -1 }, "BatchBytes"},
		{"negative queue bytes", func(c *Config) { c.MaxQueueBytes = -1 }, "MaxQueueBytes"},
		{"negative visibility", func(c *Config) { c.Visibility = -time.Second }, "Visibility"},
		{"negative insert timeout", func(c *Config) { c.InsertTimeout = -time.Second }, "InsertTimeout"},
		{"retry min above max", func(c *Config) { c.RetryMin, c.RetryMax = time.Minute, time.Second }, "RetryMin"},
		{"retry min above default max", func(c *Config) { c.RetryMin = time.Hour }, "RetryMin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{MemberID: 1}
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.wantField {
				t.Fatalf("got %v, want a *FieldError for %s", err, tc.wantField)
			}
		})
	}
}

func TestNew_Validate_refusesInvalid(t *testing.T) {
	if _, err := New(Config{MemberID: 1, Prefetch: -1}); err == nil {
		t.Fatal("got nil, want an error for a negative Prefetch")
	}
}
