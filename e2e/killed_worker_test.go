package e2e_test

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// The worker is killed (SIGKILL) while its create is on the wire. The
// restarted worker must not send a second create: it finds the attempt
// recorded as sent and unanswered, looks the order up, and finishes it.
func TestWorkerKilledMidCreateFinishesWithOneCreate(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Latency = slowAnswers
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim.GatewayURL(), dbURL, "--read-timeout", "4s", "--poll-initial", "500ms", "--poll-max", "1s", "--unknown-grace", "4500ms")
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
	f.Latency = slowAnswers
	f.Callback.DropRate = 1
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim.GatewayURL(), dbURL, "--read-timeout", "5s", "--poll-initial", "1m", "--poll-max", "1m")
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
