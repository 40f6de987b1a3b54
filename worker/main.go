// Command worker runs payguard's PaymentWorkflow and activities and serves
// the gateway callback, /healthz and /metrics. Flags: see README or -h.
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/worker/service"
)

func main() {
	exitcode.Main("worker", func(ctx context.Context) error {
		return service.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
