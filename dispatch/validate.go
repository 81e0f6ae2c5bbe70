package dispatch

import (
	"errors"
	"fmt"

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
	errs = append(errs, setting.Negative("dispatch",
		setting.Num("Prefetch", int64(c.Prefetch)),
		setting.Num("MaxQueueBytes", c.MaxQueueBytes),
		setting.Num("MaxKeyBytes", int64(c.MaxKeyBytes)),
		setting.Num("MaxRequestBytes", int64(c.MaxRequestBytes)),
		setting.Num("BatchRows", int64(c.BatchRows)),
		setting.Num("BatchBytes", int64(c.BatchBytes)),
		setting.Num("QuotaBytes", c.QuotaBytes),
		setting.Num("DeadLetterMaxRows", int64(c.DeadLetterMaxRows)),
		setting.Num("MetricsMaxTables", int64(c.MetricsMaxTables)),
	)...)
	errs = append(errs, setting.Negative("dispatch",
		setting.Num("ReconcileInterval", c.ReconcileInterval),
		setting.Num("Visibility", c.Visibility),
		setting.Num("BatchInterval", c.BatchInterval),
		setting.Num("InsertTimeout", c.InsertTimeout),
		setting.Num("RetryMin", c.RetryMin),
		setting.Num("RetryMax", c.RetryMax),
		setting.Num("DeadLetterTTL", c.DeadLetterTTL),
	)...)
	if r := c.MaxInsertsPerSecond; r != 0 && !(r >= minInsertsPerSecond && r <= maxInsertsPerSecond) {
		bad("MaxInsertsPerSecond", fmt.Errorf("%v: want %v to %v", r, minInsertsPerSecond, maxInsertsPerSecond))
	}
	if n := c.MaxInflightInserts; n < 0 || n > maxInflightInserts {
		bad("MaxInflightInserts", fmt.Errorf("%d: want 1 to %d", n, maxInflightInserts))
	}
	if c.DeadLetterMaxRows > maxDeadLetterRows {
		bad("DeadLetterMaxRows", fmt.Errorf("%d is above %d", c.DeadLetterMaxRows, maxDeadLetterRows))
	}
	if d := c.withDefaults(); c.RetryMin >= 0 && c.RetryMax >= 0 && d.RetryMin > d.RetryMax {
		bad("RetryMin", fmt.Errorf("%v is above RetryMax %v", d.RetryMin, d.RetryMax))
	}
	return errors.Join(errs...)
}
