// Command pgsim is the payment-gateway simulator (docs/design.md §4): the gateway API on
// --addr, the admin API on --admin-addr. See the README for its flags.
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/pgsim/simulator"
)

func main() {
	exitcode.Main("pgsim", func(ctx context.Context) error {
		return simulator.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
