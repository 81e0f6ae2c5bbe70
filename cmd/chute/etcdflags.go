package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// etcdFlag is a flag of etcd 3.5's server that means nothing to chute. It
// is accepted, with one warning, so that existing etcd command lines start.
type etcdFlag struct {
	name   string
	isBool bool // takes no value: --pre-vote, or --pre-vote=false
}

// etcdExperimentalPrefix marks etcd's experimental flags, which are many
// and change between releases: prescanArgs removes them all.
const etcdExperimentalPrefix = "experimental-"

// etcdFlags returns etcd 3.5's server flags that chute ignores, in the
// order --help lists them. The flags chute shares with etcd (--name,
// --listen-client-urls, --max-txn-ops, --log-level, ...) are not here.
func etcdFlags() []etcdFlag {
	return []etcdFlag{
		// Member.
		{"wal-dir", false},
		{"snapshot-count", false},
		{"heartbeat-interval", false},
		{"election-timeout", false},
		{"initial-election-tick-advance", true},
		{"max-snapshots", false},
		{"max-wals", false},
		{"backend-bbolt-freelist-type", false},
		{"backend-batch-interval", false},
		{"backend-batch-limit", false},
		{"socket-reuse-port", true},
		{"socket-reuse-address", true},
		{"raft-read-timeout", false},
		{"raft-write-timeout", false},
		// Clustering.
		{"initial-advertise-peer-urls", false},
		{"initial-cluster", false},
		{"initial-cluster-state", false},
		{"initial-cluster-token", false},
		{"discovery", false},
		{"discovery-fallback", false},
		{"discovery-proxy", false},
		{"discovery-srv", false},
		{"discovery-srv-name", false},
		{"strict-reconfig-check", true},
		{"pre-vote", true},
		{"auto-compaction-retention", false},
		{"auto-compaction-mode", false},
		{"enable-v2", true},
		{"v2-deprecation", false},
		// Logging, profiling and monitoring.
		{"logger", false},
		{"log-outputs", false},
		{"enable-log-rotation", true},
		{"log-rotation-config-json", false},
		{"enable-pprof", true},
		{"metrics", false},
		// The v2 proxy.
		{"proxy", false},
		{"proxy-failure-wait", false},
		{"proxy-refresh-interval", false},
		{"proxy-dial-timeout", false},
		{"proxy-write-timeout", false},
		{"proxy-read-timeout", false},
	}
}

// refusedFlag is a security flag of etcd 3.5's server that chute cannot
// honour. A security flag is never ignored: given, it stops the node with
// a usage error (exit 2) that says why.
type refusedFlag struct {
	etcdFlag
	why string
}

// refusedEtcdFlags returns etcd's security flags that chute refuses. The
// others (--cert-file, --peer-client-cert-auth, ...) are chute's own
// options with etcd's meaning.
func refusedEtcdFlags() []refusedFlag {
	const noSelfClient = "chute makes no client connections to its own etcd API (no gRPC gateway or proxy)"
	const noGateway = "chute's JSON gateway makes no CORS or Host checks"
	return []refusedFlag{
		// etcd's file may set TLS and auth (client-transport-security,
		// auth-token): ignored, it started a node open.
		{etcdFlag{"config-file", false}, "chute does not read etcd's configuration file: give its settings as flags, or in chute's own YAML file with --config (snake_case keys)"},
		{etcdFlag{"client-cert-file", false}, noSelfClient},
		{etcdFlag{"client-key-file", false}, noSelfClient},
		{etcdFlag{"cors", false}, noGateway},
		{etcdFlag{"host-whitelist", false}, noGateway},
	}
}

// refusedValue is the flag.Value of a refused flag: any value is an error
// that names the flag and says why.
type refusedValue struct{ refusedFlag }

func (v *refusedValue) String() string { return "" }

func (v *refusedValue) Set(string) error { return errors.New(v.why) }

// IsBoolFlag tells package flag that a boolean refused flag takes no value.
func (v *refusedValue) IsBoolFlag() bool { return v.isBool }

// etcdSecurityFlags are etcd's flags of its --help sections Security and
// Auth, and --config-file, whose file may set any of them. A security
// flag is honoured or stops the node, never dropped: each is chute's own
// option or refused, and given as etcd's environment variable
// (ETCD_CLIENT_CERT_AUTH), which chute does not read, it stops chute
// (etcdEnvironment).
var etcdSecurityFlags = []string{
	"cert-file", "key-file", "client-cert-auth", "client-crl-file", "client-cert-allowed-hostname",
	"trusted-ca-file", "auto-tls", "peer-cert-file", "peer-key-file", "peer-client-cert-auth",
	"peer-trusted-ca-file", "peer-cert-allowed-cn", "peer-cert-allowed-hostname", "peer-auto-tls",
	"peer-client-cert-file", "peer-client-key-file", "self-signed-cert-validity", "peer-crl-file",
	"cipher-suites", "cors", "host-whitelist", "tls-min-version", "tls-max-version",
	"client-cert-file", "client-key-file",
	"auth-token", "bcrypt-cost", "auth-token-ttl",
	"config-file",
}

// etcdEnvironment looks for etcd's environment variables (ETCD_<FLAG>,
// which etcd reads for each flag) of the flags of fs, which chute does
// not read: one of a security flag is an error, as the flag ignored would
// leave the node open where etcd's is closed; the others are recorded in
// ignored, to be warned of, where they went unmentioned.
func etcdEnvironment(fs *flag.FlagSet, getenv func(string) string, ignored *ignoredFlags) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "ETCD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if err != nil || getenv(name) == "" {
			return
		}
		if slices.Contains(etcdSecurityFlags, f.Name) {
			err = fmt.Errorf("environment %s: chute does not read etcd's variables, and this one would secure the node: set --%s, or CHUTE_%s", name, f.Name, name[len("ETCD_"):])
			return
		}
		ignored.add(name + " (environment; chute reads CHUTE_" + name[len("ETCD_"):] + ")")
	})
	return err
}

// ignoredFlags records the etcd flags given on a command line.
type ignoredFlags struct {
	names []string
}

func (g *ignoredFlags) add(name string) {
	if !slices.Contains(g.names, name) {
		g.names = append(g.names, name)
	}
}

// sorted returns each recorded flag once, sorted.
func (g *ignoredFlags) sorted() []string {
	out := slices.Clone(g.names)
	slices.Sort(out)
	return out
}

// ignoredValue is the flag.Value of one etcd flag: it accepts any value
// (a boolean for a boolean flag) and records that the flag was given.
type ignoredValue struct {
	name   string
	isBool bool
	seen   *ignoredFlags
}

func (v *ignoredValue) String() string { return "" }

func (v *ignoredValue) Set(s string) error {
	if v.isBool {
		if _, err := strconv.ParseBool(s); err != nil {
			return fmt.Errorf("%q is not a boolean", s)
		}
	}
	v.seen.add(v.name)
	return nil
}

// IsBoolFlag tells package flag that a boolean etcd flag takes no value.
func (v *ignoredValue) IsBoolFlag() bool { return v.isBool }

// prescanArgs walks args as package flag will, stopping at "--" or the
// first non-flag, so that a flag's value is never taken for a flag. It
// returns args without etcd's --experimental-* flags, recording them in
// ignored; such a flag written without "=value" takes the next argument as
// its value unless that starts with "-" or is absent. A flag that is not
// chute's, not etcd's and not -h/--help is an error naming it.
func prescanArgs(fs *flag.FlagSet, args []string, ignored *ignoredFlags) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...), nil
		}
		name := strings.TrimPrefix(a[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			// Bad syntax: fs.Parse reports it.
			return append(out, args[i:]...), nil
		}
		name, _, hasValue := strings.Cut(name, "=")
		switch {
		case strings.HasPrefix(name, etcdExperimentalPrefix):
			ignored.add(name)
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			continue
		case name == "h" || name == "help":
			// fs.Parse returns flag.ErrHelp.
		default:
			f := fs.Lookup(name)
			if f == nil {
				return nil, fmt.Errorf("unknown flag --%s", name)
			}
			if !hasValue && !isBoolFlag(f.Value) && i+1 < len(args) {
				out = append(out, a, args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// isBoolFlag reports whether package flag lets v's flag go without a value.
func isBoolFlag(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
