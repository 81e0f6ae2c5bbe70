package testutil

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Build compiles the main package pkg of this module (chute/cmd/chute)
// into dir and returns the binary's path, named after pkg's last element.
// It runs the go command of PATH, which go test puts first, so it works
// from TestMain, where there is no *testing.T to fail.
func Build(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}
