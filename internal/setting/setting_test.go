package setting

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFieldError_messageAndUnwrap(t *testing.T) {
	problem := errors.New("is negative")
	e := &FieldError{Pkg: "kv", Field: "MaxTxnOps", Err: problem}
	if got, want := e.Error(), "kv: MaxTxnOps: is negative"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(e, problem) {
		t.Fatal("errors.Is does not find Err")
	}
	invalid := errors.New("gossip: invalid config")
	e = &FieldError{Pkg: "gossip", Field: "Name", Err: problem, Sentinel: invalid}
	if got, want := e.Error(), "gossip: invalid config: is negative"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(e, invalid) || !errors.Is(e, problem) {
		t.Fatal("errors.Is does not find Sentinel and Err")
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url     string
		https   bool
		wantErr string // "" for valid
	}{
		{"http://127.0.0.1:2379", false, ""},
		{"https://node-1:0", true, ""},
		{"http://127.0.0.1:2379/", false, ""},
		{"ftp://h:1", false, "scheme"},
		{"http://u:s3cret@h:1", false, "user"},
		{"http://h:1/v3", false, "path"},
		{"http://h", false, "host:port"},
		{"http://:1", false, "host is empty"},
		{"http://h:70000", false, "port"},
	}
	for _, tt := range tests {
		https, err := CheckURL(tt.url)
		switch {
		case tt.wantErr == "" && (err != nil || https != tt.https):
			t.Errorf("%s: got %v, %v; want %v, nil", tt.url, https, err, tt.https)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got %v, want an error about %q", tt.url, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", tt.url, err)
		}
	}
}

func TestNegative(t *testing.T) {
	errs := Negative("kv", Num("A", 1), Num("B", -2), Num("C", 0), Num("D", -1))
	if len(errs) != 2 || errs[0].Error() != "kv: B: -2 is negative" || errs[1].Error() != "kv: D: -1 is negative" {
		t.Fatalf("got %v, want B and D negative", errs)
	}
	var fe *FieldError
	if !errors.As(errs[0], &fe) || fe.Field != "B" {
		t.Fatalf("got %v, want a *FieldError for B", errs[0])
	}
}
