// Package setting holds what the Validate methods of chute's packages
// share: the error that names the Config field at fault, so that cmd/chute
// can name its flag instead, and the rule for listen and advertise URLs.
package setting

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// FieldError is a setting of a package's Config that cannot work. It never
// holds a password.
type FieldError struct {
	// Pkg is the package that reports it ("kv"); it starts the message.
	Pkg string
	// Field is the name of the Config field, so that a caller can say
	// which of its own settings is at fault.
	Field string
	// Err is the problem, without the package's words around it.
	Err error
	// Needs, when set, names the field this one needs and lacks (Err
	// says so in the package's words), so that a caller can name its
	// own setting for it too.
	Needs string
	// Sentinel, when set, is the package's error for any invalid
	// configuration: errors.Is matches it, and it starts the message in
	// place of Pkg and Field.
	Sentinel error
}

func (e *FieldError) Error() string {
	if e.Sentinel != nil {
		return e.Sentinel.Error() + ": " + e.Err.Error()
	}
	return e.Pkg + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns Err, and Sentinel when set.
func (e *FieldError) Unwrap() []error {
	if e.Sentinel != nil {
		return []error{e.Sentinel, e.Err}
	}
	return []error{e.Err}
}

// CheckURL accepts an http or https URL with a host and a port and no
// user, path, query or fragment, and reports whether it is https. Port 0
// is allowed: on a listen URL the kernel picks the port, and an advertise
// URL copied from such a listen URL says so. Its errors never show a
// password.
func CheckURL(raw string) (https bool, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") { // it may hold a password
			return false, errors.New("a URL with a user is not a URL")
		}
		return false, fmt.Errorf("%q is not a URL", raw)
	}
	shown := u.Redacted()
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, fmt.Errorf("%q: scheme must be http or https", shown)
	}
	if u.User != nil {
		return false, fmt.Errorf("%q: must not contain a user", shown)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false, fmt.Errorf("%q: must not contain a path, query or fragment", shown)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return false, fmt.Errorf("%q: want host:port", shown)
	}
	if host == "" {
		return false, fmt.Errorf("%q: host is empty", shown)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false, fmt.Errorf("%q: port %q is not a number from 0 to 65535", shown, port)
	}
	return u.Scheme == "https", nil
}

// Number is a numeric setting and the name of its field.
type Number[T ~int | ~int64] struct {
	Field string
	Value T
}

// Num names value after its field.
func Num[T ~int | ~int64](field string, value T) Number[T] {
	return Number[T]{Field: field, Value: value}
}

// Negative returns a FieldError of pkg for each of nums below zero, in
// their order: sizes, counts and durations, whose zero means a default.
func Negative[T ~int | ~int64](pkg string, nums ...Number[T]) []error {
	var errs []error
	for _, n := range nums {
		if n.Value < 0 {
			errs = append(errs, &FieldError{Pkg: pkg, Field: n.Field, Err: fmt.Errorf("%v is negative", n.Value)})
		}
	}
	return errs
}
