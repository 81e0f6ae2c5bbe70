//go:build e2e

package e2e

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// jwtKeys writes a new RSA key pair as PEM files and returns the key and
// the files' paths.
func jwtKeys(t testing.TB) (key *rsa.PrivateKey, pubFile, privFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pubFile, privFile = filepath.Join(dir, "jwt.pub"), filepath.Join(dir, "jwt.key")
	for file, block := range map[string]*pem.Block{
		pubFile:  {Type: "PUBLIC KEY", Bytes: pub},
		privFile: {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return key, pubFile, privFile
}

// signRS256 returns a JWT of claims signed with key.
func signRS256(t testing.TB, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// jwtClaims checks token's RS256 signature with pub and returns its
// claims.
func jwtClaims(token string, pub *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%d dot-separated parts, want 3", len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil || header.Alg != "RS256" {
		return nil, fmt.Errorf("header %q: want alg RS256", parts[0])
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("signature: %v", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return nil, fmt.Errorf("signature: %v", err)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	claims := map[string]any{}
	return claims, json.Unmarshal(b, &claims)
}

// TestAuth_jwt_rs256KeysFromFiles runs etcd 3.4 and chute with
// --auth-token jwt,pub-key=...,priv-key=...,sign-method=RS256 and the
// same key files: each issues a token signed by the key, naming the user
// and expiring within the ttl, that reads the user's keys; clientv3 logs
// in with it; a token of the same claims signed by another key, and a
// token altered to name root, are refused as invalid.
func TestAuth_jwt_rs256KeysFromFiles(t *testing.T) {
	t.Parallel()
	key, pubFile, privFile := jwtKeys(t)
	other, _, _ := jwtKeys(t)
	flag := "jwt,pub-key=" + pubFile + ",priv-key=" + privFile + ",sign-method=RS256,ttl=10m"
	for _, start := range []func() *Proc{
		func() *Proc { return StartEtcd(t, "--auth-token", flag) },
		func() *Proc { return StartChute(t, "--auth-token", flag) },
	} {
		p := start()
		for _, args := range append(appAuthSetup(), []string{"--user", authRoot, "put", "app/a", "1"}) {
			ctlOK(t, p, "", args...)
		}
		ctx, cancel := rpcCtx()
		auth, err := pb.NewAuthClient(mustConn(t, p)).Authenticate(ctx, &pb.AuthenticateRequest{Name: "app", Password: authProdPass})
		cancel()
		if err != nil {
			t.Fatalf("%s: authenticate app: %v", p, err)
		}
		claims, err := jwtClaims(auth.Token, &key.PublicKey)
		if err != nil {
			t.Fatalf("%s: token %q: %v", p, auth.Token, err)
		}
		exp, _ := claims["exp"].(float64)
		if claims["username"] != "app" || time.Until(time.Unix(int64(exp), 0)) > 10*time.Minute || time.Until(time.Unix(int64(exp), 0)) < 5*time.Minute {
			t.Errorf("%s: claims %v: want username app, exp within the 10m ttl", p, claims)
		}

		kv := kvClient(t, p)
		if err := rangeWith(kv, auth.Token, "app/a"); err != nil {
			t.Errorf("%s: get app/a with the token: %v", p, err)
		}
		requireStatus(t, p.Name+": get other with the token", rangeWith(kv, auth.Token, "other"), rpctypes.ErrGRPCPermissionDenied)
		forged := signRS256(t, other, claims)
		requireStatus(t, p.Name+": get app/a with a token of another key", rangeWith(kv, forged, "app/a"), rpctypes.ErrGRPCInvalidAuthToken)
		parts := strings.Split(auth.Token, ".")
		rootClaims := map[string]any{}
		for k, v := range claims {
			rootClaims[k] = v
		}
		rootClaims["username"] = "root"
		b, _ := json.Marshal(rootClaims)
		altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		requireStatus(t, p.Name+": get other with the token altered to name root", rangeWith(kv, altered, "other"), rpctypes.ErrGRPCInvalidAuthToken)

		cli := authClient(t, p, "app", authProdPass)
		ctx, cancel = rpcCtx()
		resp, err := cli.Get(ctx, "app/", clientv3.WithPrefix())
		cancel()
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("%s: clientv3 as app: get app/ --prefix: got %v, %v; want app/a", p, resp, err)
		}
	}
}
