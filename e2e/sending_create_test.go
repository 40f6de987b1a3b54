package e2e_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A create whose sender stopped with it on the wire is still SENDING when a
// lookup by order id finds its transaction (payment PENDING with its key),
// and then the order is cancelled: the cancel closes the attempt and ends
// the order CANCELLED from there. (Closing it the way a retried create
// does, payment UNKNOWN, is no move from PENDING: the cancel would be
// refused every time, the workflow fail and the stock stay held.)

// gatewayHoldsCreates is pgsim taking each create after 3 s and leaving it
// PENDING: a worker can be killed with the create on the wire and its
// transaction already at the gateway.
func gatewayHoldsCreates() simulator.Faults {
	f := testenv.QuietFaults()
	f.Latency = slowAnswers
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	return f
}

// placeAndKillMidCreate places orderID (with the starter's flags) and
// kills the worker running it once its create is on the wire and at the
// gateway.
func placeAndKillMidCreate(t *testing.T, w *workerProcess, first *exec.Cmd, st *store.Store, sim *simulator.Server, orderID string,
	flags ...string) {
	t.Helper()
	w.placeOrder(context.Background(), orderID, flags...)
	onTheWire(t, st, orderID, func() bool { return sim.Stats().Orders[orderID].CreateRequests == 1 },
		"create on the wire, its transaction at the gateway")
	kill(t, first)
}

// waitFound waits until a lookup recorded the transaction, the attempt
// still SENDING.
func waitFound(t *testing.T, st *store.Store, orderID string) {
	t.Helper()
	list := waitLookupFound(t, st, orderID)
	require.Equal(t, "SENDING", list[0].State, "the create is still SENDING")
}

// waitLookupFound waits until a lookup recorded the transaction (payment
// PENDING with its key) and returns the order's creates.
func waitLookupFound(t *testing.T, st *store.Store, orderID string) []store.Attempt {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, 60*time.Second, func() bool {
		o, err := st.GetOrder(ctx, orderID)
		return err == nil && o.PaymentStatus == status.PaymentPending && o.TransactionKey != ""
	}, "the transaction found by a lookup (payment PENDING)")
	list, err := st.Attempts(ctx, orderID)
	require.NoError(t, err)
	return list
}

// heldAfterADeadWorker places an order (with the starter's flags) whose
// worker dies with its create at the gateway, then starts a second worker
// whose own request breaker (process scope, open for breakerOpen) two other
// orders trip while the gateway is down for a moment: the first task runs
// again there, its create refused. The gateway is back when it returns.
func heldAfterADeadWorker(t *testing.T, breakerOpen string, flags ...string) (*store.Store, *simulator.Server, string) {
	t.Helper()
	sim := testenv.Pgsim(t, gatewayHoldsCreates())
	w := newWorkerProcess(t, sim.GatewayURL(), testenv.NewDatabase(t), "--read-timeout", "20s", "--unknown-grace", "21s", "--poll-initial", "500ms", "--poll-max", "1s",
		"--request-breaker-consecutive-failures", "2", "--request-breaker-open", breakerOpen,
		"--breaker-scope", "process") // the second worker's own breaker trips on its own two failures
	first := w.start()
	ctx := context.Background()
	st := w.stockedStore(ctx)
	_, err := st.SetStock(ctx, "P1", 9) // three orders of 2
	require.NoError(t, err)
	orderID := testenv.ID("held")
	placeAndKillMidCreate(t, w, first, st, sim, orderID, flags...)

	testenv.PatchFaults(t, sim, map[string]any{"latency": map[string]any{"min": 0, "max": 0}, "down": true})
	w.start() // the first is dead: its port is free
	for _, other := range []string{testenv.ID("trip-1"), testenv.ID("trip-2")} {
		w.placeOrder(ctx, other)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return breakerState(t, w.httpAddr, activities.CreateBreakerName) == 2 },
		"the request breaker OPEN on two creates that could not reach the gateway")
	testenv.PatchFaults(t, sim, map[string]any{"down": false})
	return st, sim, orderID
}

// requireCancelled: the workflow ended cancelled, the order CANCELLED with
// its stock released and nothing charged.
func requireCancelled(t *testing.T, st *store.Store, sim *simulator.Server, orderID string, runErr error) {
	t.Helper()
	o, err := st.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	gw := sim.Stats().Orders[orderID]
	t.Logf("order %s payment %s reservation %s; gateway %+v", o.Status, o.PaymentStatus, o.Reservation, gw)
	assert.True(t, temporal.IsCanceledError(runErr), "the workflow ended: %v", runErr)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Zero(t, gw.Successful)
}

// The second worker runs the first task again with its request breaker open
// (the creates of two other orders could not reach the gateway, down for a
// moment): its create is refused from memory, reading nothing, until the
// breaker lets it through; then the database answers for the first create
// (closed UNKNOWN: its sender died), sends nothing, and the lookup finds
// the first create's transaction, which the operator's cancel cancels.
func TestCreateHeldByTheBreakerAfterADeadWorkerFindsItsFirstCreate(t *testing.T) {
	t.Parallel()
	st, sim, orderID := heldAfterADeadWorker(t, "3s")
	list := waitLookupFound(t, st, orderID)
	require.Len(t, list, 1, "no second create: the database answered for the first")
	assert.Equal(t, store.OutcomeUnknown, list[0].Outcome, "the dead sender's create closed UNKNOWN")
	assert.Equal(t, 1, sim.Stats().Orders[orderID].CreateRequests)

	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(context.Background(), id, ""))
	requireCancelled(t, st, sim, orderID, workflowEnd(t, tc, id, 60*time.Second))
}

// The same re-run, with the request breaker open past the order's
// deadline: the create is refused from memory every time, reading nothing,
// and at the deadline the compensation's cancel is refused while the dead
// sender's create may be at the gateway — so it searches, finds the
// transaction and cancels it. "Not sent now" never compensates a charge
// away unseen.
func TestCreateHeldByTheBreakerPastTheDeadlineCancelsTheFirstCreate(t *testing.T) {
	t.Parallel()
	st, sim, orderID := heldAfterADeadWorker(t, "10m", "--deadline", "40s")
	tc := testenv.Temporal(t)
	require.NoError(t, workflowEnd(t, tc, workflows.PaymentWorkflowID(orderID), 90*time.Second))
	o, err := st.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	gw := sim.Stats().Orders[orderID]
	t.Logf("order %s payment %s reservation %s; gateway %+v", o.Status, o.PaymentStatus, o.Reservation, gw)
	assert.Equal(t, status.OrderCancelled, o.Status, "compensated at the deadline")
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, 1, gw.CreateRequests, "nothing re-sent")
	assert.Equal(t, 1, gw.Cancelled, "the dead sender's transaction found and cancelled")
	assert.Zero(t, gw.Successful)
}

// The order's workflow is lost (terminated) with the create on the wire; the
// recovery the sweep starts finds the transaction, and is cancelled.
func TestRecoveryCancelledOverACreateStillSending(t *testing.T) {
	t.Parallel()
	sim := testenv.Pgsim(t, gatewayHoldsCreates())
	w := newWorkerProcess(t, sim.GatewayURL(), testenv.NewDatabase(t), "--read-timeout", "5s", "--poll-initial", "500ms", "--poll-max", "1s")
	first := w.start()
	ctx := context.Background()
	st := w.stockedStore(ctx)
	orderID := testenv.ID("recover-sending")
	placeAndKillMidCreate(t, w, first, st, sim, orderID)
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.TerminateWorkflow(ctx, id, "", "test: workflow lost"))
	testenv.PatchFaults(t, sim, map[string]any{"latency": map[string]any{"min": 0, "max": 0}})

	w.start()
	// What the sweep starts for an open order whose workflow is gone.
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: w.env["TASK_QUEUE"],
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, workflows.RecoverWorkflowName,
		workflows.RecoverInput{OrderID: orderID})
	require.NoError(t, err)
	waitFound(t, st, orderID)

	require.NoError(t, tc.CancelWorkflow(ctx, id, run.GetRunID()))
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	runErr := run.Get(waitCtx, nil)
	require.NoError(t, waitCtx.Err(), "recovery still running")
	requireCancelled(t, st, sim, orderID, runErr)
}
