// Command demo runs the outage demo: the local stack, the first article's
// scenario, the report and the timeline picture. `make demo` runs it.
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/internal/exitcode"
)

func main() {
	exitcode.Main("demo", func(ctx context.Context) error {
		return outage.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
