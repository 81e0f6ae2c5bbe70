package auth

import (
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultJWTTTL is how long a JWT is valid when its options name no ttl,
// as in etcd.
const DefaultJWTTTL = 5 * time.Minute

// ErrVerifyOnly is Authenticate's error on a member given only the
// public key: it verifies JWTs but cannot sign them.
var ErrVerifyOnly = errors.New("auth: jwt: token signing attempted with verify-only key")

// JWTOptions are the options of etcd's --auth-token
// "jwt,pub-key=<file>,priv-key=<file>,sign-method=<alg>[,ttl=<duration>]".
type JWTOptions struct {
	// SignMethod is the JWS algorithm: RS256/384/512, PS256/384/512,
	// ES256/384/512, EdDSA or HS256/384/512. Required.
	SignMethod string
	// PubKeyFile is the PEM public key that verifies tokens. Empty: the
	// private key's (for HS*, the private key file is the secret).
	PubKeyFile string
	// PrivKeyFile is the PEM private key that signs tokens. Empty: this
	// member verifies tokens but cannot issue them (ErrVerifyOnly).
	PrivKeyFile string
	// TTL is how long a token is valid. Zero: DefaultJWTTTL.
	TTL time.Duration
}

// ParseJWTOptions parses an --auth-token value that starts with "jwt" as
// etcd does: comma-separated key=value options, each known and given
// once, and a sign method.
func ParseJWTOptions(s string) (JWTOptions, error) {
	fields := strings.Split(s, ",")
	if fields[0] != "jwt" {
		return JWTOptions{}, fmt.Errorf("%q does not start with jwt", s)
	}
	var o JWTOptions
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || seen[k] {
			return JWTOptions{}, fmt.Errorf("option %q: want key=value, each key once", f)
		}
		seen[k] = true
		switch k {
		case "sign-method":
			o.SignMethod = v
		case "pub-key":
			o.PubKeyFile = v
		case "priv-key":
			o.PrivKeyFile = v
		case "ttl":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return JWTOptions{}, fmt.Errorf("option ttl: %q is not a positive duration", v)
			}
			o.TTL = d
		default:
			return JWTOptions{}, fmt.Errorf("unknown token option %q", k)
		}
	}
	if jwt.GetSigningMethod(o.SignMethod) == nil || o.SignMethod == "none" {
		return JWTOptions{}, fmt.Errorf("sign-method %q is not a JWS algorithm", o.SignMethod)
	}
	if o.PubKeyFile == "" && o.PrivKeyFile == "" {
		return JWTOptions{}, errors.New("pub-key or priv-key is required")
	}
	return o, nil
}

// JWT signs and verifies etcd's JWTs: claims username, revision (the
// auth revision at issue) and exp (Unix seconds). Every member given the
// same keys accepts the tokens of every other. It is immutable and safe
// for concurrent use.
type JWT struct {
	method jwt.SigningMethod
	sign   any // nil: verify only
	verify any
	ttl    time.Duration
}

// NewJWT returns the JWT of method with the PEM keys pub and priv (either
// may be empty, not both; for HS* priv is the secret itself) and ttl
// (zero: DefaultJWTTTL).
func NewJWT(method string, pub, priv []byte, ttl time.Duration) (*JWT, error) {
	m := jwt.GetSigningMethod(method)
	if m == nil || method == "none" {
		return nil, fmt.Errorf("auth: jwt: sign method %q is not a JWS algorithm", method)
	}
	if len(pub) == 0 && len(priv) == 0 {
		return nil, errors.New("auth: jwt: no key")
	}
	if ttl == 0 {
		ttl = DefaultJWTTTL
	}
	j := &JWT{method: m, ttl: ttl}
	var err error
	switch m.(type) {
	case *jwt.SigningMethodHMAC:
		if len(priv) == 0 {
			return nil, errors.New("auth: jwt: HMAC needs priv-key, the secret")
		}
		j.sign, j.verify = priv, priv
		return j, nil
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		j.sign, j.verify, err = keys(priv, pub, jwt.ParseRSAPrivateKeyFromPEM, jwt.ParseRSAPublicKeyFromPEM)
	case *jwt.SigningMethodECDSA:
		j.sign, j.verify, err = keys(priv, pub, jwt.ParseECPrivateKeyFromPEM, jwt.ParseECPublicKeyFromPEM)
	case *jwt.SigningMethodEd25519:
		j.sign, j.verify, err = keys(priv, pub, parseEdPrivateKey, jwt.ParseEdPublicKeyFromPEM)
	default:
		return nil, fmt.Errorf("auth: jwt: sign method %q is not supported", method)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: jwt: %w", err)
	}
	return j, nil
}

// keys parses the PEM keys of one kind; without pub, the public half of
// priv verifies.
func keys[S interface{ Public() crypto.PublicKey }, P any](priv, pub []byte,
	parsePriv func([]byte) (S, error), parsePub func([]byte) (P, error)) (sign, verify any, err error) {
	if len(priv) > 0 {
		k, err := parsePriv(priv)
		if err != nil {
			return nil, nil, fmt.Errorf("priv-key: %w", err)
		}
		sign, verify = k, k.Public()
	}
	if len(pub) > 0 {
		k, err := parsePub(pub)
		if err != nil {
			return nil, nil, fmt.Errorf("pub-key: %w", err)
		}
		verify = k
	}
	return sign, verify, nil
}

// parseEdPrivateKey is jwt's parser typed to the key it returns.
func parseEdPrivateKey(b []byte) (ed25519.PrivateKey, error) {
	k, err := jwt.ParseEdPrivateKeyFromPEM(b)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("not an Ed25519 key")
	}
	return ek, nil
}

// TTL is how long the tokens it signs are valid.
func (j *JWT) TTL() time.Duration { return j.ttl }

// token returns a token for user at auth revision rev, expiring ttl after
// now; ErrVerifyOnly without a private key.
func (j *JWT) token(user string, rev uint64, now time.Time) (string, error) {
	if j.sign == nil {
		return "", ErrVerifyOnly
	}
	return jwt.NewWithClaims(j.method, jwt.MapClaims{
		"username": user,
		"revision": rev,
		"exp":      now.Add(j.ttl).Unix(),
	}).SignedString(j.sign)
}

// parse returns the user and auth revision of a token signed by this
// JWT's key with its method and unexpired at now; ErrInvalidToken
// otherwise.
func (j *JWT) parse(token string, now time.Time) (string, uint64, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return j.verify, nil },
		jwt.WithValidMethods([]string{j.method.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return "", 0, ErrInvalidToken
	}
	user, ok1 := claims["username"].(string)
	rev, ok2 := claims["revision"].(float64)
	if !ok1 || !ok2 || user == "" || rev < 0 {
		return "", 0, ErrInvalidToken
	}
	return user, uint64(rev), nil
}

// TokenJWT is Token for JWTs: a token of j for user as of auth revision
// rev (Authenticate's). ErrAuthNotEnabled while auth is disabled.
func (s *Store) TokenJWT(j *JWT, user string, rev uint64, now time.Time) (string, error) {
	s.mu.RLock()
	enabled := s.enabled
	s.mu.RUnlock()
	if !enabled {
		return "", ErrAuthNotEnabled
	}
	return j.token(user, rev, now)
}

// VerifyJWT is Verify for JWTs: the user of a token of j, valid at now,
// whose user exists and has not changed its password since the token's
// revision; ErrInvalidToken otherwise.
func (s *Store) VerifyJWT(j *JWT, token string, now time.Time) (string, error) {
	name, rev, err := j.parse(token, now)
	if err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	u := s.users[name]
	if !s.enabled || u == nil || u.passRev > rev {
		return "", ErrInvalidToken
	}
	return u.name, nil
}
