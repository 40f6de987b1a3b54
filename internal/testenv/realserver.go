package testenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/temporalserver"
)

// realTemporal is the test binary's real Temporal server: its own pair of
// databases, its own ports, its log in a temporary directory (kept, and
// named on stderr, when the start fails).
type realTemporal struct {
	server *temporalserver.Server
	dbs    temporalserver.Databases
	client client.Client
	dir    string
}

func startRealServer(opts client.Options) (*realTemporal, error) {
	bin, tool, err := temporalserver.Binaries()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &realTemporal{dbs: temporalserver.NewDatabases(devserver.AdminDatabaseURL(), "test_"+randomHex(4))}
	if r.dir, err = os.MkdirTemp("", "payguard-temporal-"); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			r.stop()
		}
	}()
	if err := r.dbs.Setup(ctx, tool); err != nil {
		return nil, err
	}
	settings, err := temporalserver.DefaultSettings()
	if err != nil {
		return nil, err
	}
	if settings, err = r.dbs.Settings(settings); err != nil {
		return nil, err
	}
	if settings.PortBase, err = temporalserver.FreePortBase(); err != nil {
		return nil, err
	}
	dial := func(ctx context.Context, addr string) (client.Client, error) {
		o := opts
		o.HostPort = addr
		return client.DialContext(ctx, o)
	}
	r.server, err = temporalserver.Start(ctx, temporalserver.Options{Binary: bin, Settings: settings, Out: r.dir, Dial: dial,
		DynamicConfig: map[string]any{maxDeploymentsKey: maxDeployments}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "temporal server log: %s/temporal.log\n", r.dir)
		return nil, err
	}
	if r.client, err = dial(ctx, r.server.Addr); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

func (r *realTemporal) stop() {
	if r.client != nil {
		r.client.Close()
	}
	failed := r.server == nil
	if r.server != nil {
		_ = r.server.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = r.dbs.Drop(ctx)
	if !failed && r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}
