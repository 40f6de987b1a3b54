package e2e_test

import (
	"context"
	"testing"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli/clitest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// starter runs a starter command against the stack and returns its output.
func starter(ctx context.Context, s *testenv.Stack, args ...string) (string, error) {
	return clitest.Run(ctx, s.Getenv, args...)
}
