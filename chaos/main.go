// Command chaos runs payguard's real stack through a seeded schedule of
// faults and checks its books (see chaos/runner and chaos/check).
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/chaos/runner"
	"github.com/payguard/payguard/internal/exitcode"
)

func main() {
	exitcode.Main("chaos", func(ctx context.Context) error {
		return runner.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
