package tlsfiles

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"chute/internal/testcerts"
)

func TestFiles_Validate_cases(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Issue(t, "node", "localhost").Write(t, dir, "node")
	crl := ca.WriteCRL(t, dir, "crl")
	tests := []struct {
		name      string
		files     Files
		wantField string // "" for valid
	}{
		{"none", Files{}, ""},
		{"server", Files{CertFile: cert, KeyFile: key}, ""},
		{"mutual", Files{CertFile: cert, KeyFile: key, TrustedCAFile: caFile, ClientCertAuth: true, CRLFile: crl, AllowedCN: "n", AllowedHostname: "h"}, ""},
		{"trust only", Files{TrustedCAFile: caFile}, ""},
		{"cert without key", Files{CertFile: cert}, "CertFile"},
		{"key without cert", Files{KeyFile: key}, "KeyFile"},
		{"key does not match", Files{CertFile: cert, KeyFile: caFile}, "CertFile"},
		{"client cert without key", Files{ClientCertFile: cert}, "ClientCertFile"},
		{"CA not PEM", Files{TrustedCAFile: key}, "TrustedCAFile"},
		{"auth without CA", Files{CertFile: cert, KeyFile: key, ClientCertAuth: true}, "ClientCertAuth"},
		{"CRL without auth", Files{CertFile: cert, KeyFile: key, CRLFile: crl}, "CRLFile"},
		{"CN without auth", Files{CertFile: cert, KeyFile: key, AllowedCN: "n"}, "AllowedCN"},
		{"hostname without auth", Files{CertFile: cert, KeyFile: key, AllowedHostname: "h"}, "AllowedHostname"},
		{"CRL not a CRL", Files{CertFile: cert, KeyFile: key, TrustedCAFile: caFile, ClientCertAuth: true, CRLFile: caFile}, "CRLFile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.files.Validate()
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
			if _, ferr := FromFiles(tc.files, Suite{}, nil); ferr == nil {
				t.Fatalf("FromFiles: got nil, want %v", err)
			}
		})
	}
}

func TestSuite_Validate_cases(t *testing.T) {
	tests := []struct {
		name      string
		suite     Suite
		wantField string
	}{
		{"zero", Suite{}, ""},
		{"1.2 with suites", Suite{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, ""},
		{"min above max", Suite{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS12}, "MaxVersion"},
		{"1.3 with suites", Suite{MinVersion: tls.VersionTLS13, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, "CipherSuites"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.suite.Validate()
			var fe *FieldError
			switch {
			case tc.wantField == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.wantField != "" && (!errors.As(err, &fe) || fe.Field != tc.wantField):
				t.Fatalf("got %v, want a *FieldError for %s", err, tc.wantField)
			}
			if tc.wantField != "" {
				if _, err := SelfSigned([]string{"localhost"}, time.Hour, tc.suite); err == nil {
					t.Fatal("SelfSigned: got nil, want the suite's error")
				}
			}
		})
	}
}
