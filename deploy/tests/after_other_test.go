//go:build !e2e

package tests

// afterTests is TestMain's step after the tests; without the e2e build
// nothing was built.
func afterTests() {}
