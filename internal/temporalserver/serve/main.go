// Command serve is `make temporal-server`: the real Temporal server on the
// local PostgreSQL, on the databases temporal and temporal_visibility (set
// up on first use, brought to the release's schema at every start), on
// 127.0.0.1:7243, with the namespace and payguard's search attributes,
// until Ctrl-C. Its log is .temporal/server/temporal.log.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/temporalserver"
)

func main() {
	exitcode.Main("temporal-server", func(ctx context.Context) error {
		// No flags of its own, but -h, --version and a mistake's exit 2 as
		// every payguard binary (config.Parse).
		fs := flag.NewFlagSet("temporal-server", flag.ContinueOnError)
		if err := config.Parse(fs, os.Args[1:], os.Getenv); err != nil {
			return err
		}
		return run(ctx, os.Stdout)
	})
}

func run(ctx context.Context, stdout io.Writer) error {
	bin, tool, err := temporalserver.Binaries()
	if err != nil {
		return err
	}
	root, err := devserver.ModuleRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(root, ".temporal", "server")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dbs := temporalserver.Databases{AdminURL: devserver.AdminDatabaseURL(),
		Main: temporalserver.DefaultDB, Visibility: temporalserver.DefaultVisibilityDB}
	fmt.Fprintf(stdout, "Setting up the databases %s and %s...\n", dbs.Main, dbs.Visibility)
	if err := dbs.Setup(ctx, tool); err != nil {
		return err
	}
	settings, err := temporalserver.DefaultSettings()
	if err != nil {
		return err
	}
	if settings, err = dbs.Settings(settings); err != nil {
		return err
	}
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Binary: bin, Settings: settings, Out: out})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(stdout, "Temporal server %s on %s, namespace %s (log %s). Point payguard at it with TEMPORAL_ADDRESS=%s. Ctrl-C stops it.\n",
		temporalserver.Version, srv.Addr, temporalserver.Namespace, srv.LogPath(), srv.Addr)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if !srv.Running() {
				return fmt.Errorf("the server exited (see %s)", srv.LogPath())
			}
		}
	}
}
