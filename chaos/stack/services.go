package stack

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/devserver"
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
	proc *proc
	mu   sync.Mutex // one restart at a time
}

func startTemporal(ctx context.Context, cli, out string, extra []string) (*Temporal, error) {
	addr, err := FreeAddr()
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
	args := append(devserver.Args("127.0.0.1", port, "", dbFile), extra...)
	t := &Temporal{Addr: addr, proc: &proc{name: "temporal", path: cli, args: args, logs: out}}
	return t, t.start(ctx)
}

func (t *Temporal) start(ctx context.Context) error {
	if err := t.proc.start(); err != nil {
		return err
	}
	return t.proc.waitFor(ctx, 2*time.Minute, "frontend", func(ctx context.Context) bool {
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
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return client.DialContext(ctx, client.Options{HostPort: t.Addr, Logger: quietLogger()})
}

// Dial connects directly (not through the fault proxy): the run's own
// view, which must not be disturbed by the faults it injects.
func (t *Temporal) Dial(ctx context.Context) (client.Client, error) { return t.dialOnce(ctx) }

// Restart stops the dev server (SIGTERM, then SIGKILL) and starts it again
// on the same file and port.
func (t *Temporal) Restart(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.proc.stop(temporalGrace); err != nil {
		return err
	}
	return t.start(ctx)
}

// Pgsim is the gateway simulator process.
type Pgsim struct {
	GatewayURL, AdminURL string
	proc                 *proc
}

func startPgsim(ctx context.Context, o Options) (*Pgsim, error) {
	gw, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--addr", gw, "--admin-addr", admin, "--secret", o.Secret}, o.PgsimArgs...)
	p := &Pgsim{GatewayURL: "http://" + gw, AdminURL: "http://" + admin,
		proc: &proc{name: "pgsim", path: filepath.Join(o.Bin, "pgsim"), args: args, logs: o.Out}}
	if err := p.proc.start(); err != nil {
		return nil, err
	}
	return p, p.proc.waitFor(ctx, 30*time.Second, "admin API", httpOK(p.AdminURL+"/admin/faults"))
}

// Worker is one worker process.
type Worker struct {
	N            int
	HTTPAddr     string
	CallbackPath string
	proc         *proc
}

// Start starts the worker and waits until it is healthy.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.proc.start(); err != nil {
		return err
	}
	return w.proc.waitFor(ctx, 90*time.Second, "health", httpOK("http://"+w.HTTPAddr+"/healthz"))
}

// Kill is SIGKILL: the crash, mid-whatever-it-was-doing.
func (w *Worker) Kill() error { return w.proc.kill() }

// Running reports whether the worker process is up.
func (w *Worker) Running() bool { return w.proc.running() }

// CallbackURL is the worker's callback endpoint, directly (no proxy).
func (w *Worker) CallbackURL() string { return "http://" + w.HTTPAddr + w.CallbackPath }
