package outage

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/temporalserver"
)

// temporalAddrs are the addresses the demo's Temporal listens on, which
// must be free before it starts: the dev server's frontend and UI, or the
// real server's ports from the frontend's on (temporalserver.Ports).
func temporalAddrs(kind temporalserver.Kind) []string {
	if kind != temporalserver.KindServer {
		return []string{temporalAddr, uiAddr}
	}
	host, port, _ := net.SplitHostPort(temporalAddr)
	base, _ := strconv.Atoi(port)
	var addrs []string
	for p := base; p < base+temporalserver.Ports; p++ {
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(p)))
	}
	return addrs
}

// startTemporal starts the demo's Temporal on temporalAddr, where every
// process finds it by default. The dev server keeps its history in a fresh
// file in Out; the real server (--temporal server) on a fresh pair of
// databases, dropped when the demo stops, with its ports from
// temporalAddr's on, in place of the dev server's.
func startTemporal(ctx context.Context, o Options, procs *processes, cfg config.Common, say func(string, ...any)) error {
	if o.Temporal != temporalserver.KindServer {
		say("Starting the Temporal dev server (UI http://%s)...", uiAddr)
		dbFile := filepath.Join(o.Out, "temporal.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(dbFile + suffix)
		}
		ip, port, _ := net.SplitHostPort(temporalAddr)
		_, uiPort, _ := net.SplitHostPort(uiAddr)
		_, err := procs.start("temporal", filepath.Join(o.Bin, "temporal"), devserver.Args(ip, port, uiPort, config.DefaultCodecEndpoint, dbFile)...)
		return err
	}
	bin, tool, err := temporalserver.Binaries()
	if err != nil {
		return err
	}
	dbs := temporalserver.NewDatabases(devserver.AdminDatabaseURL(), fmt.Sprintf("demo_%d", time.Now().Unix()))
	say("Starting the Temporal server %s on PostgreSQL (databases %s, %s)...", temporalserver.Version, dbs.Main, dbs.Visibility)
	procs.after = append(procs.after, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dbs.Drop(ctx)
	})
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
	_, port, _ := net.SplitHostPort(temporalAddr)
	if settings.PortBase, err = strconv.Atoi(port); err != nil {
		return err
	}
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Binary: bin, Settings: settings, Out: o.Out,
		Dial: func(ctx context.Context, _ string) (client.Client, error) {
			opts, err := cfg.ClientOptions(slog.New(slog.DiscardHandler))
			if err != nil {
				return nil, err
			}
			return client.DialContext(ctx, opts)
		}})
	if err != nil {
		return err
	}
	procs.after = append(procs.after, func() { _ = srv.Stop() })
	return nil
}

// uiNote says where the orders can be seen: the dev server's UI, or, on
// the real server, that it has none of its own.
func uiNote(kind temporalserver.Kind, filter string) string {
	if kind == temporalserver.KindServer {
		return "The Temporal server has no UI of its own (docker compose runs temporalio/ui beside it): `bin/temporal workflow list --address " + temporalAddr + "`"
	}
	return fmt.Sprintf("Temporal UI: http://%s  %s", uiAddr, filter)
}
