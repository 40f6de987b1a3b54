// Command chaos runs payguard's real stack through a seeded schedule of
// faults and checks its books (see chaos/runner and chaos/check).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/payguard/payguard/chaos/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runner.Run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, runner.ErrViolations) {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
		os.Exit(1)
	}
}
