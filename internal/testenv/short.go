package testenv

import "testing"

// NeedsServices skips the test under `go test -short` (make test-short):
// that tier runs only what needs no service, for the edit-test loop. Without
// -short a missing service still fails the test, never skips it.
func NeedsServices(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: not in the -short tier (make test runs it)", what)
	}
}
