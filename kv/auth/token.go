package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// NewTokenKey draws a key for an AuthEnable command: TokenKeyBytes
// random bytes in base64url, as the command's field is a string, which
// protobuf wants in UTF-8.
func NewTokenKey() string {
	k := make([]byte, TokenKeyBytes)
	_, _ = rand.Read(k) // never fails (crypto/rand panics rather)
	return base64.RawURLEncoding.EncodeToString(k)
}

// HashPassword returns the bcrypt hash of password at cost, for the
// command that adds the user or changes its password.
func HashPassword(password string, cost int) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// Authenticate checks a user's password and returns the auth revision
// of the state it checked: ErrAuthNotEnabled, or ErrAuthFailed (no
// such user, a user without password, a wrong one). A token for the
// user carries that revision (Token, TokenJWT), so that a password
// change or a delete applied while bcrypt compared ends it: the check
// runs without the lock, for as long as the hash's cost takes.
func (s *Store) Authenticate(name, password string) (rev uint64, err error) {
	s.mu.RLock()
	enabled := s.enabled
	var hash []byte
	if u := s.users[name]; u != nil && !u.noPassword {
		hash = u.hash
	}
	rev = s.rev
	s.mu.RUnlock()
	if !enabled {
		return 0, ErrAuthNotEnabled
	}
	if hash == nil || bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return 0, ErrAuthFailed
	}
	return rev, nil
}

// Token returns a token for user as of auth revision rev (Authenticate's),
// valid until now+ttl on every member that holds this auth state, unless
// the user's password changed after rev. ErrAuthNotEnabled while auth is
// disabled.
func (s *Store) Token(user string, rev uint64, now time.Time, ttl time.Duration) (string, error) {
	s.mu.RLock()
	key := s.tokenKey
	enabled := s.enabled
	s.mu.RUnlock()
	if !enabled {
		return "", ErrAuthNotEnabled
	}
	body := base64.RawURLEncoding.EncodeToString([]byte(user)) + "." +
		strconv.FormatUint(rev, 10) + "." +
		strconv.FormatInt(now.Add(ttl).UnixMilli(), 10)
	return body + "." + sign(key, body), nil
}

// Verify returns the user of a valid token; ErrInvalidToken for a token
// that is malformed, signed with another key, expired at now, or whose
// user was deleted or changed its password since it was issued.
func (s *Store) Verify(token string, now time.Time) (string, error) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return "", ErrInvalidToken
	}
	body, mac := token[:i], token[i+1:]
	parts := strings.Split(body, ".")
	if len(parts) != 3 {
		return "", ErrInvalidToken
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", ErrInvalidToken
	}
	rev, err1 := strconv.ParseUint(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", ErrInvalidToken
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.enabled || !hmac.Equal([]byte(mac), []byte(sign(s.tokenKey, body))) {
		return "", ErrInvalidToken
	}
	if now.UnixMilli() >= exp {
		return "", ErrInvalidToken
	}
	u := s.users[string(name)]
	if u == nil || u.passRev > rev {
		return "", ErrInvalidToken
	}
	return u.name, nil
}

func sign(key []byte, body string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
