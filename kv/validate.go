package kv

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"

	"chute/internal/setting"
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Pkg: "kv", Field: field, Err: err}) }
	for _, l := range []struct {
		field, tlsField string
		urls            []string
	}{
		{"ListenClientURLs", "TLS", c.ListenClientURLs},
		{"ListenClientHTTPURLs", "HTTPTLS", c.ListenClientHTTPURLs},
	} {
		for _, u := range l.urls {
			secure, err := setting.CheckURL(u)
			switch {
			case err != nil:
				bad(l.field, err)
			case secure && c.TLS == nil:
				bad(l.tlsField, fmt.Errorf("%q is https: it needs a certificate", u))
			}
		}
	}
	if len(c.ListenClientHTTPURLs) > 0 && c.NoGateway {
		errs = append(errs, &FieldError{Pkg: "kv", Field: "ListenClientHTTPURLs", Needs: "NoGateway",
			Err: errors.New("they serve the JSON gateway alone, and it is turned off")})
	}
	for _, l := range []struct {
		field string
		urls  []string
	}{
		{"AdvertiseClientURLs", c.AdvertiseClientURLs},
		{"AdvertisePeerURLs", c.AdvertisePeerURLs},
	} {
		for _, u := range l.urls {
			if _, err := setting.CheckURL(u); err != nil {
				bad(l.field, err)
			}
		}
	}
	errs = append(errs, setting.Negative("kv",
		setting.Num("MaxRequestBytes", int64(c.MaxRequestBytes)),
		setting.Num("MaxTxnOps", int64(c.MaxTxnOps)),
		setting.Num("MaxKeyBytes", int64(c.MaxKeyBytes)),
		setting.Num("HistoryRevisions", c.HistoryRevisions),
		setting.Num("MinLeaseTTL", c.MinLeaseTTL),
	)...)
	errs = append(errs, setting.Negative("kv",
		setting.Num("WatchSyncInterval", c.WatchSyncInterval),
		setting.Num("WatchProgressInterval", c.WatchProgressInterval),
		setting.Num("LeaseCheckInterval", c.LeaseCheckInterval),
		setting.Num("LeaderCheckInterval", c.LeaderCheckInterval),
		setting.Num("KeepaliveMinTime", c.KeepaliveMinTime),
		setting.Num("KeepaliveInterval", c.KeepaliveInterval),
		setting.Num("KeepaliveTimeout", c.KeepaliveTimeout),
	)...)
	errs = append(errs, setting.Negative("kv", setting.Num("AuthTokenTTL", c.AuthTokenTTL))...)
	if c.BcryptCost != 0 && (c.BcryptCost < bcrypt.MinCost || c.BcryptCost > bcrypt.MaxCost) {
		bad("BcryptCost", fmt.Errorf("%d is outside %d..%d", c.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost))
	}
	return errors.Join(errs...)
}
