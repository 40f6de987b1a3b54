package stack

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/temporalserver"
)

// Stop graces: long enough for a clean stop, short enough for a chaos run.
const (
	temporalGrace = 15 * time.Second
	pgsimGrace    = 5 * time.Second
	workerGrace   = 10 * time.Second
)

// Temporal is the stack's Temporal: the dev server on a SQLite file, or
// the real server on a pair of PostgreSQL databases of its own
// (Options.Temporal); either way a restart keeps every workflow.
type Temporal struct {
	Addr string
	Kind temporalserver.Kind
	// CodecKeys is the run's payload codec key ring, fresh each run: the
	// workers and the run's own client share it.
	CodecKeys string
	proc      *process.Process         // the dev server
	real      *temporalserver.Server   // or the real server
	dbs       temporalserver.Databases // the real server's
	mu        sync.Mutex               // one restart at a time
}

func startTemporal(ctx context.Context, o Options) (*Temporal, error) {
	t := &Temporal{Kind: o.Temporal, CodecKeys: codec.NewKey("chaos")}
	if t.Kind == temporalserver.KindServer {
		return t, t.startReal(ctx, o)
	}
	addr, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	dbFile := filepath.Join(o.Out, "temporal.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(dbFile + suffix)
	}
	args := append(devserver.Args("127.0.0.1", port, "", "", dbFile), o.TemporalArgs...)
	t.Addr, t.proc = addr, &process.Process{Name: "temporal", Path: o.TemporalCLI, Args: args, LogDir: o.Out}
	return t, t.start(ctx)
}

// startReal sets up the run's databases (named after its own) and starts
// the real server on free ports, with the dev server's extra
// --dynamic-config-value arguments as dynamic config.
func (t *Temporal) startReal(ctx context.Context, o Options) error {
	bin, tool, err := temporalserver.Binaries()
	if err != nil {
		return err
	}
	extra, err := temporalserver.DynamicConfigArgs(o.TemporalArgs)
	if err != nil {
		return err
	}
	t.dbs = temporalserver.NewDatabases(o.AdminDBURL, o.DatabaseName)
	if err := t.dbs.Setup(ctx, tool); err != nil {
		return err
	}
	settings, err := temporalserver.DefaultSettings()
	if err != nil {
		return err
	}
	if settings, err = t.dbs.Settings(settings); err != nil {
		return err
	}
	if settings.PortBase, err = temporalserver.FreePortBase(); err != nil {
		return err
	}
	t.Addr = settings.FrontendAddr()
	t.real, err = temporalserver.Start(ctx, temporalserver.Options{Binary: bin, Settings: settings, Out: o.Out, DynamicConfig: extra,
		Dial: func(ctx context.Context, _ string) (client.Client, error) { return t.dialOnce(ctx) }})
	return err
}

// CPUTime is the server's CPU time so far (the bench's quiet check).
func (t *Temporal) CPUTime() time.Duration {
	if t.real != nil {
		return t.real.CPUTime()
	}
	return t.proc.CPUTime()
}

func (t *Temporal) start(ctx context.Context) error {
	if err := t.proc.Start(); err != nil {
		return err
	}
	return t.proc.WaitFor(ctx, 2*time.Minute, "frontend", temporalserver.FrontendHealthy(t.dialOnce))
}

func (t *Temporal) dialOnce(ctx context.Context) (client.Client, error) {
	opts, err := (&config.Common{TemporalAddress: t.Addr, CodecKeys: t.CodecKeys}).ClientOptions(slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return client.DialContext(ctx, opts)
}

// Dial connects directly (not through the fault proxy): the run's own
// view, which must not be disturbed by the faults it injects.
func (t *Temporal) Dial(ctx context.Context) (client.Client, error) { return t.dialOnce(ctx) }

// Restart stops the server (SIGTERM, then SIGKILL) and starts it again on
// the same databases and port.
func (t *Temporal) Restart(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.real != nil {
		return t.real.Restart(ctx)
	}
	if err := t.proc.Stop(temporalGrace); err != nil {
		return err
	}
	return t.start(ctx)
}

// stop stops the server; dropDB drops the real server's databases too (the
// dev server's file stays in Out).
func (t *Temporal) stop(dropDB bool) {
	if t.proc != nil {
		_ = t.proc.Stop(temporalGrace)
	}
	if t.real != nil {
		_ = t.real.Stop()
	}
	if dropDB && t.dbs.Main != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = t.dbs.Drop(ctx)
	}
}

// Pgsim is the gateway simulator process.
type Pgsim struct {
	GatewayURL, AdminURL string
	proc                 *process.Process
}

func startPgsim(ctx context.Context, o Options) (*Pgsim, error) {
	gw, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--addr", gw, "--admin-addr", admin, "--secret", o.Secret}, o.PgsimArgs...)
	p := &Pgsim{GatewayURL: "http://" + gw, AdminURL: "http://" + admin,
		proc: &process.Process{Name: "pgsim", Path: filepath.Join(o.Bin, "pgsim"), Args: args, LogDir: o.Out}}
	if err := p.proc.Start(); err != nil {
		return nil, err
	}
	return p, p.proc.WaitFor(ctx, 30*time.Second, "admin API", process.HTTPOK(p.AdminURL+"/admin/faults"))
}

// CPUTime is pgsim's CPU time so far (the bench's cost per order: the
// gateway shares the machine in the bench, as it would not in production).
func (p *Pgsim) CPUTime() time.Duration { return p.proc.CPUTime() }

// Worker is one worker process.
type Worker struct {
	N            int
	HTTPAddr     string
	CallbackPath string
	proc         *process.Process
}

// CPUTime is the worker's CPU time so far (the bench's cost per order).
func (w *Worker) CPUTime() time.Duration { return w.proc.CPUTime() }

// Start starts the worker and waits until it is healthy.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.proc.Start(); err != nil {
		return err
	}
	return w.proc.WaitFor(ctx, 90*time.Second, "health", process.HTTPOK("http://"+w.HTTPAddr+"/healthz"))
}

// Kill is SIGKILL: the crash, mid-whatever-it-was-doing.
func (w *Worker) Kill() error { return w.proc.Kill() }

// Running reports whether the worker process is up.
func (w *Worker) Running() bool { return w.proc.Running() }

// CallbackURL is the worker's callback endpoint, directly (no proxy).
func (w *Worker) CallbackURL() string { return "http://" + w.HTTPAddr + w.CallbackPath }
