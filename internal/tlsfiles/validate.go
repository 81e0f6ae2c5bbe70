package tlsfiles

import (
	"crypto/tls"
	"errors"

	"chute/internal/setting"
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every setting of f that cannot work, each a
// *FieldError, joined: a certificate without its key (or the other way
// round), files that cannot be read or do not match, ClientCertAuth
// without TrustedCAFile, and CRLFile, AllowedCN or AllowedHostname
// without ClientCertAuth, which would have no effect. It reads the files.
func (f Files) Validate() error {
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: field, Err: err})
	}
	pair := func(certField, keyField, cert, key string) {
		switch {
		case cert == "" && key == "":
		case cert == "":
			errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: keyField, Needs: certField, Err: errors.New("needs its certificate file")})
		case key == "":
			errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: certField, Needs: keyField, Err: errors.New("needs its key file")})
		default:
			if err := CheckKeyPair(cert, key); err != nil {
				bad(certField, err)
			}
		}
	}
	pair("CertFile", "KeyFile", f.CertFile, f.KeyFile)
	pair("ClientCertFile", "ClientKeyFile", f.ClientCertFile, f.ClientKeyFile)
	if f.TrustedCAFile != "" {
		if err := CheckCA(f.TrustedCAFile); err != nil {
			bad("TrustedCAFile", err)
		}
	}
	if f.ClientCertAuth && f.TrustedCAFile == "" {
		errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: "ClientCertAuth", Needs: "TrustedCAFile", Err: errors.New("needs a trusted CA file to verify client certificates with")})
	}
	for _, o := range []struct{ field, value string }{
		{"CRLFile", f.CRLFile}, {"AllowedHostname", f.AllowedHostname}, {"AllowedCN", f.AllowedCN},
	} {
		if o.value != "" && !f.ClientCertAuth {
			bad(o.field, errors.New("has no effect without client certificate authentication"))
		}
	}
	if f.CRLFile != "" {
		if err := CheckCRL(f.CRLFile); err != nil {
			bad("CRLFile", err)
		}
	}
	return errors.Join(errs...)
}

// Validate reports every setting of s that cannot work, each a
// *FieldError, joined: a MinVersion above MaxVersion, and CipherSuites
// with MinVersion TLS 1.3, whose suites are not configurable.
func (s Suite) Validate() error {
	var errs []error
	if s.MaxVersion != 0 && s.MinVersion > s.MaxVersion {
		errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: "MaxVersion", Err: errors.New("is below the minimum version")})
	}
	if s.MinVersion == tls.VersionTLS13 && len(s.CipherSuites) > 0 {
		errs = append(errs, &FieldError{Pkg: "tlsfiles", Field: "CipherSuites", Err: errors.New("TLS 1.3 suites are not configurable; drop them or lower the minimum version")})
	}
	return errors.Join(errs...)
}
