//go:build !linux

package faults

import "errors"

// inNamespace fails: network namespaces are Linux's.
func inNamespace(name string, f func() error) error {
	return errors.New("faults: network namespaces need Linux")
}
