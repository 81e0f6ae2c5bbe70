package sink

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	ep := Endpoint{Addr: "h:8123", User: "alice", Password: "s3cr3t/p@ss"}
	auth := ep.AuthHeader()
	tests := []struct{ in, want string }{
		{"wrong password s3cr3t/p@ss for alice", "wrong password xxxxx for alice"},
		{"Authorization: " + auth, "Authorization: xxxxx"},
		{"creds " + strings.TrimPrefix(auth, "Basic "), "creds xxxxx"},
		{"url http://alice:s3cr3t%2Fp@ss@h", "url http://alice:xxxxx@h"},
		{"url http://alice:s3cr3t%2Fp%40ss@h", "url http://alice:xxxxx@h"},
		{"nothing secret", "nothing secret"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in, ep); got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Redact("s3cr3t", Endpoint{Addr: "h:1"}); got != "s3cr3t" {
		t.Errorf("Redact without credentials: got %q", got)
	}
}
