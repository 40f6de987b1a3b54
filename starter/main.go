// Command starter is payguard's command line: place and cancel orders, read
// their status, set stock, send a test callback, run a load (docs/design.md §8).
package main

import (
	"context"
	"os"

	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/starter/cli"
)

func main() {
	exitcode.Main("starter", func(ctx context.Context) error {
		return cli.Run(ctx, os.Args[1:], cli.Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	})
}
