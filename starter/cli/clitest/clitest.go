// Package clitest runs starter commands in-process for tests, the way a
// user's shell would, and returns what they printed; PlaceOrder and
// PendingOrder place orders on a testenv stack with them. It lives beside
// the starter, not in internal/testenv, so the test helpers need not import
// a command at the top of the layers.
package clitest

import (
	"bytes"
	"context"
	"strings"

	"github.com/payguard/payguard/starter/cli"
)

// Run runs one starter command with getenv as its environment and returns
// its standard output, trimmed.
func Run(ctx context.Context, getenv func(string) string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := cli.Run(ctx, args, cli.Env{Getenv: getenv, Stdout: &out, Stderr: &errOut})
	return strings.TrimSpace(out.String()), err
}
