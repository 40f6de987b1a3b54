package service_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// starter runs a starter command against the stack and returns its output.
// It is here, not in testenv, so the test helpers need not import the
// starter, a command at the top of the layers.
func starter(ctx context.Context, s *testenv.Stack, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := cli.Run(ctx, args, cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &errOut})
	return strings.TrimSpace(out.String()), err
}
