package peer

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
)

func TestConfig_Validate_cases(t *testing.T) {
	creds := credentials.NewTLS(&tls.Config{})
	for _, tc := range []struct {
		name      string
		cfg       Config
		wantField string // "": valid
		wantErr   string
	}{
		{"empty", Config{}, "", ""},
		{"listen port 0", Config{ListenURLs: []string{"http://127.0.0.1:0"}}, "", ""},
		{"two plain URLs", Config{ListenURLs: []string{"http://127.0.0.1:1", "http://[::1]:2"}}, "", ""},
		{"https with credentials", Config{ListenURLs: []string{"https://127.0.0.1:1"}, Credentials: creds}, "", ""},
		{"http with credentials", Config{ListenURLs: []string{"http://127.0.0.1:1"}, Credentials: creds}, "", ""},
		{"https without credentials", Config{ListenURLs: []string{"https://127.0.0.1:1"}}, "Credentials", "needs a certificate"},
		{"mixed", Config{ListenURLs: []string{"https://127.0.0.1:1", "http://127.0.0.1:2"}, Credentials: creds}, "ListenURLs", "mixes"},
		{"no scheme", Config{ListenURLs: []string{"127.0.0.1:2380"}}, "ListenURLs", "not a URL"},
		{"no port", Config{ListenURLs: []string{"http://h"}}, "ListenURLs", "host:port"},
		{"path", Config{ListenURLs: []string{"http://h:1/p"}}, "ListenURLs", "path"},
		{"scheme", Config{ListenURLs: []string{"grpc://h:1"}}, "ListenURLs", "scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want a *FieldError wrapping ErrInvalidConfig", err)
			}
			if fe.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v (field %s), want field %s about %q", err, fe.Field, tc.wantField, tc.wantErr)
			}
		})
	}
}

func TestNewServer_Validate_refusesInvalid(t *testing.T) {
	if _, err := NewServer(Config{ListenURLs: []string{"https://127.0.0.1:0"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
}
