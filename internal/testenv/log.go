package testenv

import (
	"log/slog"
	"os"
	"testing"
)

// Logger returns a logger for services under test: silent unless
// PAYGUARD_TEST_LOG=1, so a failing run can be replayed with logs.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("PAYGUARD_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}
