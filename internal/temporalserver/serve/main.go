// Command serve is `make temporal-server`: the real Temporal server on the
// local PostgreSQL, on the databases temporal and temporal_visibility (set
// up on first use, brought to the release's schema at every start), on
// 127.0.0.1:7243, with the namespace and payguard's search attributes,
// until Ctrl-C. Its log is .temporal/server/temporal.log.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/temporalserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout io.Writer) error {
	bin, err := temporalserver.ServerBinary()
	if err != nil {
		return err
	}
	tool, err := temporalserver.SQLTool()
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
