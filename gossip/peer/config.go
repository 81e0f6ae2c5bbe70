package peer

import (
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"chute/internal/setting"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("peer: invalid config")

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Config configures a Server. Zero values are documented per field;
// NewServer never reads flags, files or the environment.
type Config struct {
	// ListenURLs are bound, every one, by Start: http://host:port (port 0
	// picks a free port), or https:// with Credentials. Empty: nothing is
	// bound.
	ListenURLs []string
	// ClusterID is checked on every call received: calls from members of
	// another cluster are refused.
	ClusterID uint64
	// Credentials secure the listener: TLS from the peer certificates or
	// derived from the gossip key. Nil: plain text, open to anyone who can
	// reach the peer port.
	Credentials credentials.TransportCredentials
	// ServerOptions are added to the server's own (message buffers,
	// codec). Nil: grpc's defaults.
	ServerOptions []grpc.ServerOption
	// Logger receives the listener's logs. Nil: discarded.
	Logger *slog.Logger
}

// Validate reports every problem of c, each a *FieldError, joined. It
// does no I/O.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Pkg: "peer", Sentinel: ErrInvalidConfig, Field: field, Err: err})
	}
	var plain, secure []string
	for _, u := range c.ListenURLs {
		switch https, err := setting.CheckURL(u); {
		case err != nil:
			bad("ListenURLs", err)
		case https:
			secure = append(secure, u)
		default:
			plain = append(plain, u)
		}
	}
	if len(plain) > 0 && len(secure) > 0 {
		bad("ListenURLs", errors.New("mixes http:// and https://; the peer link is TLS on every URL or on none"))
	}
	if len(secure) > 0 && c.Credentials == nil {
		bad("Credentials", fmt.Errorf("%q is https: it needs a certificate", secure[0]))
	}
	return errors.Join(errs...)
}
