package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// Runs of the workflow's first task again. That task runs Reserve, the
// create and sometimes Settle as local activities and records them only when
// it completes; a task that does not (its worker killed, its completion
// refused while a signal or a cancel waits) runs again from a history
// without them, and must end as the database says the first run ended.

// The first task sends the create, the gateway charges it and its SUCCESS
// callback is signalled while the task still waits for the create's answer;
// the worker is killed. The task runs again on another worker — Reserve, the
// create (the database answers for it), the callback — and Settle CONFIRMS
// the order; its completion is refused, because an operator's cancel came
// while that Settle was blocked. The next run sees the cancel right after
// Reserve: it must keep the CONFIRMED order's charge, not refund it with
// the stock sold, and not fail on CONFIRMED -> CANCELLED.
func TestRunAgainUnderACancelKeepsAConfirmedOrdersCharge(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults() // processing 0: SUCCESS and its callback at once
	// The create is charged and called back, but its answer is held: the
	// first task stays in the local create with the callback signalled.
	f.Create.TimeoutRate, f.Create.TimeoutDelay = 1, simulator.Duration(30*time.Second)
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim.GatewayURL(), dbURL, "--read-timeout", "9s", "--poll-initial", "1m", "--poll-max", "1m")
	first := w.start()
	ctx := context.Background()
	st := w.stockedStore(ctx)

	orderID := testenv.ID("rerun")
	id := workflows.PaymentWorkflowID(orderID)
	w.placeOrder(ctx, orderID)
	testenv.Eventually(t, 10*time.Second, func() bool { return sim.Stats().Orders[orderID].Successful == 1 }, "the gateway charged")
	// The server holds the signal behind the running first task; it shows
	// in the history only when that task ends, so the worker's count says it.
	testenv.Eventually(t, 10*time.Second, func() bool { return callbacksAccepted(w.httpAddr) > 0 }, "the SUCCESS callback signalled")
	require.False(t, testenv.HistoryHas(t, id, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), "the first task has not completed")
	kill(t, first)
	testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})

	release := testenv.BlockWrites(t, st.Pool(), "UPDATE", "reservations")
	w.start()
	testenv.WaitLockWaiters(t, st.Pool(), 1, "advisory", "the run again's Settle CONFIRMED blocked")
	tc := testenv.Temporal(t)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	release()

	runErr := workflowEnd(t, tc, id, 60*time.Second)
	t.Logf("workflow ended: %v\nhistory:\n%s", runErr, historySummary(t, tc, id))
	o, err := st.GetOrder(ctx, orderID)
	require.NoError(t, err)
	gw := sim.Stats().Orders[orderID]
	stock, err := st.GetStock(ctx, "P1")
	require.NoError(t, err)
	t.Logf("order %s payment %s reservation %s; gateway %+v; stock %+v", o.Status, o.PaymentStatus, o.Reservation, gw, stock)
	assert.Equal(t, status.OrderConfirmed, o.Status)
	assert.Equal(t, 1, gw.CreateRequests, "one create")
	assert.Equal(t, 1, gw.Successful, "the CONFIRMED order's charge stands")
	assert.Zero(t, gw.Refunded, "the CONFIRMED order's charge was refunded")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock)
	assert.NoError(t, runErr, "the workflow ends as the order did, CONFIRMED")
	assert.Equal(t, string(status.OrderConfirmed), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()))
	// The killed worker's create is one; the answer the earlier run settled,
	// delivered again, is none.
	assert.Equal(t, []string{"create sent and never answered"}, anomalies(t, st, orderID))
}

// The first task's create is refused as not processed (429) on its only
// allowed try, and the task compensates: its CancelOrder ends the order
// CANCELLED; its completion is refused because a signal came meanwhile. The
// run again must end the order CANCELLED at once, not send the create
// again (the store refuses it) and wait UNKNOWN for the deadline.
func TestRunAgainOverACancelledOrderEndsIt(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusTooManyRequests
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.RequestAttempts, c.PollInitial, c.PollMax = 1, time.Minute, time.Minute
	})
	setStock(t, s, "P1", 5)
	orderID, runErr := signalWhileBlocked(t, s, "UPDATE", "reservations", "the first task's CancelOrder blocked")
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	o, err := s.Store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	assert.NoError(t, runErr)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Equal(t, 1, s.Sim.Stats().Orders[orderID].CreateRequests, "one create")
	assert.Equal(t, string(status.OrderCancelled), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()))
	assertNoAnomaly(t, s.Store, orderID)
}

// assertNoAnomaly: the order's event log records no anomaly.
func assertNoAnomaly(t *testing.T, st *store.Store, orderID string) {
	t.Helper()
	assert.Empty(t, anomalies(t, st, orderID))
}

// The gateway refuses the create and the first task settles FAILED; its
// completion is refused because a signal came meanwhile (a lookup hint, as
// an unsigned callback makes one), not a cancel. The run again must end
// FAILED at once, as the database has it, not send the create again (the
// store refuses it: the order is final), take that for an unknown outcome
// and wait PENDING/UNKNOWN until the order's deadline.
func TestRunAgainOverAFailedOrderEndsItFailed(t *testing.T) {
	t.Parallel()
	f := testenv.Processing(time.Hour)
	f.Create.FailNext, f.Create.ErrorStatus = 1, http.StatusBadRequest
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	orderID, runErr := signalWhileBlocked(t, s, "INSERT", "payment_attempts", "the create blocked as it starts")
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	o, err := s.Store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	assert.NoError(t, runErr)
	assert.Equal(t, status.OrderFailed, o.Status)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, 1, s.Sim.Stats().Orders[orderID].CreateRequests, "one create")
	assertNoAnomaly(t, s.Store, orderID)
	assert.Equal(t, string(status.OrderFailed), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()))
	assert.Equal(t, string(status.PaymentFailed), searchAttribute(t, tc, id, workflows.PaymentStatusKey.GetName()))
}

// signalWhileBlocked places an order whose first workflow task blocks on an
// event ("INSERT", "UPDATE") of table, signals the workflow (a lookup hint,
// as an unsigned callback makes one) while the task waits there, so the
// server refuses that task's completion, then lets the write through, and
// returns how the workflow ended. The order's deadline is ten minutes away:
// a run that waits for it does not end within waitWorkflow's minute.
func signalWhileBlocked(t *testing.T, s *testenv.Stack, event, table, blocked string) (orderID string, runErr error) {
	t.Helper()
	release := testenv.BlockWrites(t, s.Store.Pool(), event, table)
	orderID = testenv.ID("rerun")
	id := workflows.PaymentWorkflowID(orderID)
	placeOrder(t, s, orderID, "P1", 2)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", blocked)
	tc := testenv.Temporal(t)
	require.NoError(t, tc.SignalWorkflow(context.Background(), id, "", workflows.LookupHintSignal, workflows.LookupHint{}))
	release()
	runErr = workflowEnd(t, tc, id, 60*time.Second)
	t.Logf("workflow ended: %v\nhistory:\n%s", runErr, historySummary(t, tc, id))
	return orderID, runErr
}

// callbacksAccepted counts the worker's 2xx answer codes to callbacks that
// have answered one at least (its /metrics).
func callbacksAccepted(httpAddr string) int {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, metricnames.Callbacks+`{code="2`) && !strings.HasSuffix(line, " 0") {
			n++
		}
	}
	return n
}
