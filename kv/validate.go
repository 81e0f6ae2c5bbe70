package kv

import (
	"errors"
	"fmt"
	"time"

	"chute/internal/setting"
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Pkg: "kv", Field: field, Err: err}) }
	for _, u := range c.ListenClientURLs {
		secure, err := setting.CheckURL(u)
		switch {
		case err != nil:
			bad("ListenClientURLs", err)
		case secure && c.TLS == nil:
			bad("TLS", fmt.Errorf("%q is https: it needs a certificate", u))
		}
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
	for _, n := range []struct {
		field string
		v     int64
	}{
		{"MaxRequestBytes", int64(c.MaxRequestBytes)},
		{"MaxTxnOps", int64(c.MaxTxnOps)},
		{"MaxKeyBytes", int64(c.MaxKeyBytes)},
		{"HistoryRevisions", c.HistoryRevisions},
		{"MinLeaseTTL", c.MinLeaseTTL},
	} {
		if n.v < 0 {
			bad(n.field, fmt.Errorf("%d is negative", n.v))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"WatchSyncInterval", c.WatchSyncInterval},
		{"WatchProgressInterval", c.WatchProgressInterval},
		{"LeaseCheckInterval", c.LeaseCheckInterval},
		{"TombstoneTTL", c.TombstoneTTL},
	} {
		if d.v < 0 {
			bad(d.field, fmt.Errorf("%v is negative", d.v))
		}
	}
	return errors.Join(errs...)
}
