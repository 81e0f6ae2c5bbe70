package qlog

import (
	"errors"
	"strings"
	"testing"
)

func TestConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero values", func(c *Config) { *c = Config{Dir: c.Dir} }, ""},
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir"},
		{"tiny segments", func(c *Config) { c.SegmentBytes = 100 }, "SegmentBytes"},
		{"negative record limit", func(c *Config) { c.MaxRecordBytes = -1 }, "MaxRecordBytes"},
		{"huge record limit", func(c *Config) { c.MaxRecordBytes = 2 << 30 }, "MaxRecordBytes"},
		{"negative quota", func(c *Config) { c.QuotaBytes = -1 }, "QuotaBytes"},
		{"low ratio", func(c *Config) { c.CompactRatio = 1 }, "CompactRatio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Dir = "/nonexistent"
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want a FieldError of %s", err, tc.field)
			}
			if _, err := Open(c, nil); err == nil || !strings.Contains(err.Error(), "invalid config") {
				t.Errorf("Open: %v, want the invalid config", err)
			}
		})
	}
}
