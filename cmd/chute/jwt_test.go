package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfig_Validate_jwtKeyFiles checks that --auth-token jwt,... is
// valid when its key files load, with its ttl, and names --auth-token
// when they do not.
func TestConfig_Validate_jwtKeyFiles(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv := filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.AuthToken = "jwt,priv-key=" + priv + ",sign-method=ES256,ttl=2m"
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: got %v, want nil", err)
	}
	j, err := c.jwtTokens()
	if err != nil || j == nil || j.TTL() != 2*time.Minute {
		t.Fatalf("jwtTokens: got %v, %v; want a JWT with ttl 2m", j, err)
	}
	for _, bad := range []string{
		"jwt,priv-key=" + priv + ",sign-method=RS256", // an EC key for RSA
		"jwt,priv-key=" + filepath.Join(dir, "missing") + ",sign-method=ES256",
		"jwt,priv-key=" + priv,
	} {
		c.AuthToken = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--auth-token:") {
			t.Errorf("Validate with %q: got %v, want an error naming --auth-token", bad, err)
		}
	}
}
