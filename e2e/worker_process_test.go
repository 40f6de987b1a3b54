package e2e_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/store"
)

// Worker processes of the real binary, which a test can kill, freeze or
// start beside one another.

// workerProcess runs the worker binary as a process of its own, so a test
// can kill it: start starts one and waits until it is healthy.
type workerProcess struct {
	t        *testing.T
	binary   string
	env      map[string]string
	args     []string
	httpAddr string
}

// newWorkerProcess is a worker on a new task queue, with its database at
// dbURL and its gateway at gatewayURL, its callbacks to itself.
func newWorkerProcess(t *testing.T, gatewayURL, dbURL string, args ...string) *workerProcess {
	httpAddr, queue := testenv.FreeAddr(t), testenv.ID("workers")
	// A deployment of its own, as testenv's stacks have (NewStackOn).
	return &workerProcess{t: t, binary: testenv.BuildBinary(t, "./worker"), httpAddr: httpAddr,
		env: map[string]string{
			"TEMPORAL_ADDRESS": testenv.TemporalAddress(t), "TASK_QUEUE": queue, deployment.NameEnv: queue, "DATABASE_URL": dbURL,
			"GATEWAY_URL": gatewayURL, "GATEWAY_SECRET": testenv.Secret, "CALLBACK_URL": "http://" + httpAddr + "/callbacks/gateway",
			codec.KeysEnv: testenv.CodecKeys(),
		},
		args: append([]string{"--http-addr", httpAddr}, args...)}
}

// sibling is a second worker of the same fleet (task queue, database,
// gateway) with an HTTP address of its own: the first may be stopped, not
// dead, and still hold its port.
func (w *workerProcess) sibling() *workerProcess {
	s := *w
	s.httpAddr = testenv.FreeAddr(w.t)
	s.args = append([]string{"--http-addr", s.httpAddr}, w.args[2:]...)
	return &s
}

// start starts the worker, killed at the test's end, and waits until it is
// healthy.
func (w *workerProcess) start() *exec.Cmd {
	t := w.t
	cmd := exec.Command(w.binary, w.args...)
	cmd.Env = os.Environ()
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if os.Getenv("PAYGUARD_TEST_LOG") == "1" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	probe := http.Client{Timeout: 2 * time.Second}
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := probe.Get("http://" + w.httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, "worker healthy")
	return cmd
}

// stockedStore opens the workers' database (closed when the test ends) with
// 5 × P1 in stock; the first worker started has created its schema.
func (w *workerProcess) stockedStore(ctx context.Context) *store.Store {
	st, err := store.Open(ctx, w.env["DATABASE_URL"])
	require.NoError(w.t, err)
	w.t.Cleanup(st.Close)
	_, err = st.SetStock(ctx, "P1", 5)
	require.NoError(w.t, err)
	return st
}

// placeOrder places an order for 2 × P1 through the starter.
func (w *workerProcess) placeOrder(ctx context.Context, orderID string, flags ...string) {
	getenv := func(k string) string { return w.env[k] }
	args := append([]string{"order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", orderID}, flags...)
	require.NoError(w.t, cli.Run(ctx, args,
		cli.Env{Getenv: getenv, Stdout: io.Discard, Stderr: io.Discard}))
}

// startWorkers starts three workers of one fleet (a new task queue and
// database) against gatewayURL, each with args, and waits until all are
// healthy. env is their environment; callbacks go to the first.
func startWorkers(t *testing.T, gatewayURL string, args ...string) (env map[string]string, addrs []string) {
	t.Helper()
	first := newWorkerProcess(t, gatewayURL, testenv.NewDatabase(t), args...)
	for _, w := range []*workerProcess{first, first.sibling(), first.sibling()} {
		w.start()
		addrs = append(addrs, w.httpAddr)
	}
	return first.env, addrs
}

// onTheWire waits until the order's one create is recorded SENDING (and
// also holds, when given): sent, or about to be, and not answered.
func onTheWire(t *testing.T, st *store.Store, orderID string, also func() bool, what string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := st.Attempts(context.Background(), orderID)
		return err == nil && len(list) == 1 && list[0].State == "SENDING" && (also == nil || also())
	}, what)
}

// freeze stops the process (SIGSTOP: a paused VM or container) until
// resume, which the test's cleanup also calls, at most once: a frozen
// worker's open transaction holds locks other cleanups wait on.
func freeze(t *testing.T, cmd *exec.Cmd) (resume func()) {
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	var once sync.Once
	resume = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// kill kills the process (SIGKILL) and reaps it.
func kill(t *testing.T, cmd *exec.Cmd) {
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
}

// requireOneCreateMatched judges an order a killed or frozen worker left
// behind, after an operator's cancel: one create reached the gateway, and
// money and stock agree (requireMoneyAndStockAgree).
func requireOneCreateMatched(t *testing.T, st *store.Store, sim *simulator.Server, o store.Order, runErr error) {
	t.Helper()
	gw := sim.Stats().Orders[o.OrderID]
	stock, err := st.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	assert.Equal(t, 1, gw.CreateRequests, "one create")
	requireMoneyAndStockAgree(t, o, gw, stock, runErr)
}
