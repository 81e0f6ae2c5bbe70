package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// pemKeys returns a new key pair of kind ("rsa", "ec", "ed") in PEM.
func pemKeys(t *testing.T, kind string) (pub, priv []byte) {
	t.Helper()
	var key any
	var err error
	switch kind {
	case "rsa":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ec":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.(crypto.Signer).Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// jwtStore returns an auth-enabled store with root and user u.
func jwtStore(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	addUser(t, s, RootUser, "pw")
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: RootUser, Role: RootRole}}, nil)
	addUser(t, s, "u", "pw")
	enable(t, s, nil)
	return s
}

func TestParseJWTOptions_etcdFlags(t *testing.T) {
	o, err := ParseJWTOptions("jwt,pub-key=a.pub,priv-key=a.key,sign-method=RS256,ttl=10m")
	if err != nil {
		t.Fatal(err)
	}
	if want := (JWTOptions{SignMethod: "RS256", PubKeyFile: "a.pub", PrivKeyFile: "a.key", TTL: 10 * time.Minute}); o != want {
		t.Errorf("ParseJWTOptions: got %+v, want %+v", o, want)
	}
	for _, bad := range []string{
		"jwt",
		"jwt,pub-key=a.pub,priv-key=a.key",
		"jwt,pub-key=a.pub,sign-method=XX256",
		"jwt,pub-key=a.pub,sign-method=none",
		"jwt,sign-method=RS256",
		"jwt,pub-key=a.pub,sign-method=RS256,ttl=5",
		"jwt,pub-key=a.pub,sign-method=RS256,color=red",
		"jwt,pub-key=a.pub,pub-key=b.pub,sign-method=RS256",
		"jwts,pub-key=a.pub,sign-method=RS256",
	} {
		if _, err := ParseJWTOptions(bad); err == nil {
			t.Errorf("ParseJWTOptions(%q): got nil error, want one", bad)
		}
	}
}

func TestStore_VerifyJWT_methods(t *testing.T) {
	rsaPub, rsaPriv := pemKeys(t, "rsa")
	ecPub, ecPriv := pemKeys(t, "ec")
	edPub, edPriv := pemKeys(t, "ed")
	for _, tc := range []struct {
		method    string
		pub, priv []byte
	}{
		{"RS256", rsaPub, rsaPriv}, {"RS512", nil, rsaPriv}, {"PS384", rsaPub, rsaPriv},
		{"ES256", ecPub, ecPriv}, {"EdDSA", edPub, edPriv}, {"HS256", nil, []byte("secret")},
	} {
		t.Run(tc.method, func(t *testing.T) {
			s := jwtStore(t)
			now := time.Unix(1_700_000_000, 0)
			signer, err := NewJWT(tc.method, tc.pub, tc.priv, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.TokenJWT(signer, "u", s.Revision(), now)
			if err != nil {
				t.Fatal(err)
			}
			verifier := signer
			if tc.pub != nil {
				// Another member holding only the public key.
				if verifier, err = NewJWT(tc.method, tc.pub, nil, time.Minute); err != nil {
					t.Fatal(err)
				}
				if _, err := s.TokenJWT(verifier, "u", s.Revision(), now); !errors.Is(err, ErrVerifyOnly) {
					t.Errorf("TokenJWT with the public key only: got %v, want %v", err, ErrVerifyOnly)
				}
			}
			if u, err := s.VerifyJWT(verifier, tok, now.Add(59*time.Second)); err != nil || u != "u" {
				t.Errorf("VerifyJWT before exp: got %q, %v; want u", u, err)
			}
			if _, err := s.VerifyJWT(verifier, tok, now.Add(61*time.Second)); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("VerifyJWT after exp: got %v, want %v", err, ErrInvalidToken)
			}
			i := strings.LastIndexByte(tok, '.')
			if _, err := s.VerifyJWT(verifier, tok[:i+1]+"AAAA"+tok[i+5:], now); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("VerifyJWT of a changed signature: got %v, want %v", err, ErrInvalidToken)
			}
		})
	}
}

// TestStore_VerifyJWT_onlyItsMethod: a token signed with the member's
// own key under another method (RS512 for an RS256 member) is refused:
// only the configured method verifies, as etcd's --auth-token sign-method
// says.
func TestStore_VerifyJWT_onlyItsMethod(t *testing.T) {
	pub, priv := pemKeys(t, "rsa")
	s := jwtStore(t)
	now := time.Unix(1_700_000_000, 0)
	verifier, err := NewJWT("RS256", pub, priv, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewJWT("RS512", pub, priv, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.TokenJWT(other, "u", s.Revision(), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyJWT(other, tok, now); err != nil {
		t.Fatalf("VerifyJWT under its own method: %v", err)
	}
	if u, err := s.VerifyJWT(verifier, tok, now); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("VerifyJWT of an RS512 token by an RS256 member: got %q, %v; want %v", u, err, ErrInvalidToken)
	}
}

func TestStore_VerifyJWT_endsWithUser(t *testing.T) {
	pub, priv := pemKeys(t, "rsa")
	j, err := NewJWT("RS256", pub, priv, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.TTL() != DefaultJWTTTL {
		t.Errorf("TTL: got %v, want %v", j.TTL(), DefaultJWTTTL)
	}
	other, err := NewJWT("RS256", pemKeysPub(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := jwtStore(t)
	now := time.Unix(1_700_000_000, 0)
	tok := func() string {
		tok, err := s.TokenJWT(j, "u", s.Revision(), now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	verify := func(what, tok string, want error) {
		t.Helper()
		if _, err := s.VerifyJWT(j, tok, now); !errors.Is(err, want) {
			t.Errorf("VerifyJWT %s: got %v, want %v", what, err, want)
		}
	}
	t1 := tok()
	if _, err := s.VerifyJWT(other, t1, now); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("VerifyJWT with another key: got %v, want %v", err, ErrInvalidToken)
	}
	apply(t, s, &pb.InternalRaftRequest{AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "r"}}, nil)
	verify("after another change", t1, nil)
	apply(t, s, &pb.InternalRaftRequest{AuthUserChangePassword: &pb.AuthUserChangePasswordRequest{Name: "u", HashedPassword: "x"}}, nil)
	verify("after the password changed", t1, ErrInvalidToken)
	t2 := tok()
	verify("issued after the change", t2, nil)
	apply(t, s, &pb.InternalRaftRequest{AuthUserDelete: &pb.AuthUserDeleteRequest{Name: "u"}}, nil)
	verify("after the user was deleted", t2, ErrInvalidToken)
	addUser(t, s, "u", "pw")
	verify("after the user was added again", t2, ErrInvalidToken)
	apply(t, s, &pb.InternalRaftRequest{AuthDisable: &pb.AuthDisableRequest{}}, nil)
	if _, err := s.TokenJWT(j, "u", s.Revision(), now); !errors.Is(err, ErrAuthNotEnabled) {
		t.Errorf("TokenJWT with auth disabled: got %v, want %v", err, ErrAuthNotEnabled)
	}
}

// pemKeysPub returns the PEM public key of a new RSA pair.
func pemKeysPub(t *testing.T) []byte {
	pub, _ := pemKeys(t, "rsa")
	return pub
}
