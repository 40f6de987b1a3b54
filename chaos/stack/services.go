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
)

// Stop graces: long enough for a clean stop, short enough for a chaos run.
const (
	temporalGrace = 15 * time.Second
	pgsimGrace    = 5 * time.Second
	workerGrace   = 10 * time.Second
)

// Temporal is the dev server on a SQLite file, so a restart keeps every
// workflow.
type Temporal struct {
	Addr string
	// CodecKeys is the run's payload codec key ring, fresh each run: the
	// workers and the run's own client share it.
	CodecKeys string
	proc      *process.Process
	mu        sync.Mutex // one restart at a time
}

func startTemporal(ctx context.Context, cli, out string, extra []string) (*Temporal, error) {
	addr, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	dbFile := filepath.Join(out, "temporal.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(dbFile + suffix)
	}
	args := append(devserver.Args("127.0.0.1", port, "", "", dbFile), extra...)
	t := &Temporal{Addr: addr, CodecKeys: codec.NewKey("chaos"), proc: &process.Process{Name: "temporal", Path: cli, Args: args, LogDir: out}}
	return t, t.start(ctx)
}

// CPUTime is the dev server's CPU time so far (the bench's quiet check).
func (t *Temporal) CPUTime() time.Duration { return t.proc.CPUTime() }

func (t *Temporal) start(ctx context.Context) error {
	if err := t.proc.Start(); err != nil {
		return err
	}
	return t.proc.WaitFor(ctx, 2*time.Minute, "frontend", func(ctx context.Context) bool {
		cl, err := t.dialOnce(ctx)
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = cl.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err == nil
	})
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

// Restart stops the dev server (SIGTERM, then SIGKILL) and starts it again
// on the same file and port.
func (t *Temporal) Restart(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.proc.Stop(temporalGrace); err != nil {
		return err
	}
	return t.start(ctx)
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
