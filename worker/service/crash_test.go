package service_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// workerProcess runs the worker binary as a process of its own, so a test
// can kill it: start starts one and waits until it is healthy.
type workerProcess struct {
	t        *testing.T
	binary   string
	env      map[string]string
	args     []string
	httpAddr string
}

func newWorkerProcess(t *testing.T, sim *simulator.Server, dbURL string, args ...string) *workerProcess {
	httpAddr := testenv.FreeAddr(t)
	return &workerProcess{t: t, binary: testenv.BuildBinary(t, "./worker"), httpAddr: httpAddr,
		env: map[string]string{
			"TEMPORAL_ADDRESS": testenv.TemporalAddress(t), "TASK_QUEUE": testenv.ID("crash"), "DATABASE_URL": dbURL,
			"GATEWAY_URL": sim.GatewayURL(), "GATEWAY_SECRET": testenv.Secret, "CALLBACK_URL": "http://" + httpAddr + "/callbacks/gateway",
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
	t.Cleanup(func() { _ = cmd.Process.Kill() })
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
func (w *workerProcess) placeOrder(ctx context.Context, orderID string) {
	getenv := func(k string) string { return w.env[k] }
	require.NoError(w.t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", orderID},
		cli.Env{Getenv: getenv, Stdout: devNull{}, Stderr: devNull{}}))
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

// stop freezes the process (SIGSTOP: a paused VM or container) until
// resume, which the test's cleanup also calls, at most once: a frozen
// worker's open transaction holds locks other cleanups wait on.
func stop(t *testing.T, cmd *exec.Cmd) (resume func()) {
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	var once sync.Once
	resume = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

func kill(t *testing.T, cmd *exec.Cmd) {
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
}

// The worker is killed (SIGKILL) while its create is on the wire. The
// restarted worker must not send a second create: it finds the attempt
// recorded as sent and unanswered, looks the order up, and finishes it.
func TestWorkerKilledMidCreateFinishesWithOneCreate(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim, dbURL, "--read-timeout", "5s", "--poll-initial", "500ms", "--poll-max", "1s", "--unknown-grace", "1s")
	httpAddr := w.httpAddr
	start := w.start
	first := start()

	ctx := context.Background()
	st := w.stockedStore(ctx)
	w.placeOrder(ctx, "crash-1")

	// At the gateway, not only recorded SENDING: killed between the two,
	// the create never left, the gateway knows nothing, and the re-send
	// the workflow then grants is the order's one create (a CI run did so).
	onTheWire(t, st, "crash-1", func() bool { return sim.Stats().Orders["crash-1"].CreateRequests == 1 },
		"create on the wire, held at the gateway")
	kill(t, first)
	testenv.PatchFaults(t, sim, map[string]any{"latency": map[string]any{"min": 0, "max": 0}})

	second := start()
	testenv.Eventually(t, 60*time.Second, func() bool {
		o, err := st.GetOrder(ctx, "crash-1")
		return err == nil && o.Status == status.OrderConfirmed
	}, "order confirmed after the restart")
	stats := sim.Stats().Orders["crash-1"]
	assert.Equal(t, 1, stats.CreateRequests, "exactly one create reached the gateway")
	assert.Len(t, stats.Transactions, 1)
	attempts, err := st.Attempts(ctx, "crash-1")
	require.NoError(t, err)
	require.Len(t, attempts, 1, "the retry after the crash sent nothing")
	assert.Equal(t, store.OutcomeUnknown, attempts[0].Outcome)
	stock, err := st.GetStock(ctx, "P1")
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock)

	// SIGTERM is a graceful stop: the process exits 0 and the port closes.
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err := <-exited:
		assert.NoError(t, err, "clean exit on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop on SIGTERM")
	}
	_, err = http.Get("http://" + httpAddr + "/healthz")
	assert.Error(t, err, "no longer taking requests")
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// The worker is killed while its create is on the wire, and an operator
// cancels the order before another worker takes the workflow up. The gateway
// took the create (and charges it; its callback is lost). The workflow task
// that reserved the stock and sent the create never completed, so its run
// again from the history has no record of the create, and the cancel is
// there before Reserve's local activity answers. The database knows a create
// went out: the compensation must find the charge at the gateway and cancel
// it, not end the order CANCELLED with the customer charged.
func TestWorkerKilledMidCreateThenCancelledLeavesNoCharge(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	f.Callback.DropRate = 1
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim, dbURL, "--read-timeout", "5s", "--poll-initial", "1m", "--poll-max", "1m")
	first := w.start()

	ctx := context.Background()
	st := w.stockedStore(ctx)
	orderID := testenv.ID("crash")
	w.placeOrder(ctx, orderID)
	onTheWire(t, st, orderID, nil, "create on the wire")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return sim.Stats().Orders[orderID].Successful == 1
	}, "the gateway charged the create")
	kill(t, first)

	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	w.start()
	runErr := workflowEnd(t, tc, id, 60*time.Second)
	o, err := st.GetOrder(ctx, orderID)
	require.NoError(t, err)
	requireOneCreateMatched(t, st, sim, o, runErr)
}

// workflowEnd waits up to d for the workflow id to end and returns how it
// ended; the test fails when it is still running.
func workflowEnd(t *testing.T, tc client.Client, id string, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	runErr := tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
	require.NoError(t, ctx.Err(), "workflow still running")
	t.Logf("workflow ended: %v", runErr)
	return runErr
}

// requireOneCreateMatched judges an order a killed or frozen worker left
// behind, after an operator's cancel: one create reached the gateway, the
// order ended CONFIRMED with its charge and the stock sold, or CANCELLED
// with no charge and the stock back, and the workflow did not fail.
func requireOneCreateMatched(t *testing.T, st *store.Store, sim *simulator.Server, o store.Order, runErr error) {
	t.Helper()
	gw := sim.Stats().Orders[o.OrderID]
	stock, err := st.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	t.Logf("order %s payment %s reservation %s; gateway %+v; stock %+v", o.Status, o.PaymentStatus, o.Reservation, gw, stock)
	assert.Equal(t, 1, gw.CreateRequests, "one create")
	switch o.Status {
	case status.OrderConfirmed:
		assert.Equal(t, 1, gw.Successful, "a CONFIRMED order's charge stands")
		assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock)
	case status.OrderCancelled:
		assert.Zero(t, gw.Successful, "a CANCELLED order keeps no charge")
		assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock)
	default:
		t.Errorf("order left %s", o.Status)
	}
	if runErr != nil && !temporal.IsCanceledError(runErr) {
		t.Errorf("the workflow failed: %v", runErr)
	}
}
