// Command api serves payguard's HTTP order API (docs/design.md §12).
// Flags: see README or -h.
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/internal/exitcode"
)

func main() {
	exitcode.Main("api", func(ctx context.Context) error {
		return httpapi.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
