package main

import (
	"fmt"
	"os"

	"chute/kv/auth"
)

// jwtTokens reads the key files of --auth-token jwt,... and returns the
// JWT that signs and verifies tokens; nil for simple tokens.
func (c Config) jwtTokens() (*auth.JWT, error) {
	if c.AuthToken == "simple" {
		return nil, nil
	}
	o, err := auth.ParseJWTOptions(c.AuthToken)
	if err != nil {
		return nil, err
	}
	var pub, priv []byte
	if o.PubKeyFile != "" {
		if pub, err = os.ReadFile(o.PubKeyFile); err != nil {
			return nil, fmt.Errorf("pub-key: %w", err)
		}
	}
	if o.PrivKeyFile != "" {
		if priv, err = os.ReadFile(o.PrivKeyFile); err != nil {
			return nil, fmt.Errorf("priv-key: %w", err)
		}
	}
	return auth.NewJWT(o.SignMethod, pub, priv, o.TTL)
}
