// Command bench measures payguard beside a no-op workflow of the same shape
// on one stack in one run (`make bench`; see bench/harness).
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/bench/harness"
	"github.com/payguard/payguard/internal/exitcode"
)

func main() {
	exitcode.Main("bench", func(ctx context.Context) error {
		return harness.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
