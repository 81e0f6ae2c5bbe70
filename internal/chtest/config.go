package chtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// Options changes the server Start launches. The zero value is a server
// with only the default user, without a password.
type Options struct {
	// User, when set, adds a second user with this name and Password that
	// may use every database from 127.0.0.1. The default user keeps its
	// empty password; Exec, Query and Count always act as the default user.
	// Empty: no second user. "default" is refused.
	User string
	// Password is User's password, stored as its SHA-256 in users.xml.
	// Empty: User has no password.
	Password string
	// Settings are User's settings profile, for example
	// {"max_memory_usage": "1000"} to make User's inserts fail with code
	// 241. The default user keeps the defaults, so Exec, Query and Count
	// still work. Needs User. Nil: the server's defaults.
	Settings map[string]string

	// TLSCertFile and TLSKeyFile, when set, are the PEM certificate and
	// key of an https_port the server opens on a third free loopback
	// port, next to plain HTTP (see HTTPSAddr). Both or neither. Empty: no
	// https port.
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile, when set, makes the https port demand a client
	// certificate signed by the CAs in this PEM file (OpenSSL's
	// verificationMode strict). Needs TLSCertFile. Empty: no client
	// certificate is asked for.
	TLSClientCAFile string
}

// identRE matches what may be an XML element name in users.xml, where
// 18.16 keeps user and setting names.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate reports options that would write a users.xml the server cannot
// read.
func (o Options) validate() error {
	if o.User == "" && o.Password != "" {
		return errors.New("options: Password without User")
	}
	if o.User == "" && len(o.Settings) > 0 {
		return errors.New("options: Settings without User")
	}
	if o.User != "" {
		if !identRE.MatchString(o.User) {
			return fmt.Errorf("options: user name %q: want letters, digits and _", o.User)
		}
		if o.User == "default" {
			return errors.New(`options: user "default" always exists; pick another name`)
		}
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("options: TLSCertFile and TLSKeyFile go together")
	}
	if o.TLSClientCAFile != "" && o.TLSCertFile == "" {
		return errors.New("options: TLSClientCAFile without TLSCertFile")
	}
	for name := range o.Settings {
		if !identRE.MatchString(name) {
			return fmt.Errorf("options: setting name %q: want letters, digits and _", name)
		}
	}
	return nil
}

// ports are the loopback ports one server listens on. No interserver port:
// 18.16 opens none when interserver_http_port is absent. HTTPS is 0 when
// the server has no https port.
type ports struct {
	HTTP, TCP, HTTPS int
}

// configTemplate is the whole server configuration. 18.16 needs nothing
// else to start from an empty directory as root or as any other user: it
// creates path, tmp_path and the log directory itself. Absent on purpose:
// interserver_http_port, zookeeper, macros, remote_servers, query_log,
// dictionaries, and openSSL unless Options ask for TLS. Caches are small
// (they are allocated on demand anyway) so several servers fit on a small
// machine.
//
// TLS, as 18.16 takes it (checked here): https_port with
// openSSL.server.certificateFile and privateKeyFile is enough, ECDSA keys
// included; no dhParamsFile is needed (TLS 1.3 and ECDHE need none).
// verificationMode none asks for no client certificate; strict with
// caConfig refuses a connection without one signed by that CA.
var configTemplate = template.Must(template.New("config.xml").Funcs(template.FuncMap{"x": xmlText}).Parse(
	`<?xml version="1.0"?>
<!-- Written by chute/internal/chtest for one test; removed with the test's temp dir. -->
<yandex>
    <logger>
        <level>information</level>
        <log>{{x .Dir}}/log/server.log</log>
        <errorlog>{{x .Dir}}/log/server.err.log</errorlog>
        <size>10M</size>
        <count>1</count>
        <console>0</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>{{.Ports.HTTP}}</http_port>
    <tcp_port>{{.Ports.TCP}}</tcp_port>
{{- if .TLS.TLSCertFile}}
    <https_port>{{.Ports.HTTPS}}</https_port>
    <openSSL>
        <server>
            <certificateFile>{{x .TLS.TLSCertFile}}</certificateFile>
            <privateKeyFile>{{x .TLS.TLSKeyFile}}</privateKeyFile>
{{- if .TLS.TLSClientCAFile}}
            <verificationMode>strict</verificationMode>
            <caConfig>{{x .TLS.TLSClientCAFile}}</caConfig>
{{- else}}
            <verificationMode>none</verificationMode>
{{- end}}
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>false</cacheSessions>
        </server>
    </openSSL>
{{- end}}
    <path>{{x .Dir}}/data/</path>
    <tmp_path>{{x .Dir}}/tmp/</tmp_path>
    <user_files_path>{{x .Dir}}/user_files/</user_files_path>
    <format_schema_path>{{x .Dir}}/format_schemas/</format_schema_path>
    <users_config>{{x .Dir}}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <max_concurrent_queries>64</max_concurrent_queries>
    <max_table_size_to_drop>0</max_table_size_to_drop>
    <max_partition_size_to_drop>0</max_partition_size_to_drop>
    <mlock_executable>false</mlock_executable>
</yandex>
`))

// usersTemplate declares the default user, the optional second user and
// their profiles. The default profile also sets the server's own settings:
// background_pool_size is a profile setting in 18.16, and 4 merge threads
// instead of 16 suit a 2-core test machine. Profile "user" holds
// Options.Settings for the second user.
var usersTemplate = template.Must(template.New("users.xml").Funcs(template.FuncMap{"x": xmlText}).Parse(
	`<?xml version="1.0"?>
<!-- Written by chute/internal/chtest for one test; removed with the test's temp dir. -->
<yandex>
    <profiles>
        <default>
            <background_pool_size>4</background_pool_size>
        </default>
        <user>
{{- range .Settings}}
            <{{.Name}}>{{x .Value}}</{{.Name}}>
{{- end}}
        </user>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
{{- if .User}}
        <{{.User}}>
{{- if .PasswordSHA256}}
            <password_sha256_hex>{{.PasswordSHA256}}</password_sha256_hex>
{{- else}}
            <password></password>
{{- end}}
            <networks><ip>127.0.0.1</ip></networks>
            <profile>user</profile>
            <quota>default</quota>
        </{{.User}}>
{{- end}}
    </users>
    <quotas>
        <default></default>
    </quotas>
</yandex>
`))

type setting struct{ Name, Value string }

// writeConfig writes config.xml and users.xml into dir for a server on p.
func writeConfig(dir string, p ports, o Options) error {
	var cfg strings.Builder
	if err := configTemplate.Execute(&cfg, struct {
		Dir   string
		Ports ports
		TLS   Options
	}{dir, p, o}); err != nil {
		return err
	}
	var users strings.Builder
	if err := usersTemplate.Execute(&users, usersData(o)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(cfg.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users.String()), 0o644)
}

func usersData(o Options) any {
	var sum string
	if o.Password != "" {
		h := sha256.Sum256([]byte(o.Password))
		sum = hex.EncodeToString(h[:])
	}
	settings := make([]setting, 0, len(o.Settings))
	for name, v := range o.Settings {
		settings = append(settings, setting{name, v})
	}
	slices.SortFunc(settings, func(a, b setting) int { return strings.Compare(a.Name, b.Name) })
	return struct {
		User, PasswordSHA256 string
		Settings             []setting
	}{o.User, sum, settings}
}

// xmlText escapes s for use as XML character data.
func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}
