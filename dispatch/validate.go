package dispatch

import (
	"errors"
	"fmt"
	"time"

	"chute/internal/setting"
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every setting that cannot work, each a *FieldError,
// joined: a missing MemberID, negative sizes and durations, and a retry
// backoff whose minimum is above its maximum. Zero sizes and durations
// mean their documented defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Pkg: "dispatch", Field: field, Err: err})
	}
	if c.MemberID == 0 {
		bad("MemberID", errors.New("is required"))
	}
	for _, n := range []struct {
		field string
		v     int64
	}{
		{"Prefetch", int64(c.Prefetch)},
		{"MaxQueueBytes", c.MaxQueueBytes},
		{"MaxKeyBytes", int64(c.MaxKeyBytes)},
		{"MaxRequestBytes", int64(c.MaxRequestBytes)},
		{"BatchRows", int64(c.BatchRows)},
		{"BatchBytes", int64(c.BatchBytes)},
	} {
		if n.v < 0 {
			bad(n.field, fmt.Errorf("%d is negative", n.v))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"ReconcileInterval", c.ReconcileInterval},
		{"Visibility", c.Visibility},
		{"BatchInterval", c.BatchInterval},
		{"InsertTimeout", c.InsertTimeout},
		{"RetryMin", c.RetryMin},
		{"RetryMax", c.RetryMax},
	} {
		if d.v < 0 {
			bad(d.field, fmt.Errorf("%v is negative", d.v))
		}
	}
	if d := c.withDefaults(); c.RetryMin >= 0 && c.RetryMax >= 0 && d.RetryMin > d.RetryMax {
		bad("RetryMin", fmt.Errorf("%v is above RetryMax %v", d.RetryMin, d.RetryMax))
	}
	return errors.Join(errs...)
}
