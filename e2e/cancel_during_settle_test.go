package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// An operator's cancel while the order's Settle runs. A local step's
// effect is committed before the workflow task that ran it completes; a
// task that does not complete is run again from its history, and what it
// decides then must agree with what was committed.

// An operator's cancel arrives while the workflow task that settles a
// SUCCESS callback is running its local Settle (blocked on the order's row,
// which the test holds). The Settle commits CONFIRMED; the task then tries
// to complete the workflow, which the server refuses while a cancel request
// waits, so the task is run again from its history, where the callback and
// the cancel now arrive together. Whatever the workflow then does, money and
// stock must agree: CONFIRMED with the charge standing, or CANCELLED with
// the charge refunded and the stock released.
func TestOperatorCancelDuringLocalSettleKeepsMoneyAndStockTogether(t *testing.T) {
	t.Parallel()
	cancelDuringLocalSettle(t, "lset-0001", func(s *testenv.Stack, id, key string) {
		code, _ := s.PostCallback(t, testenv.CallbackBody("lset-0001", key, gateway.StatusSuccess, 5000), testenv.Secret, time.Now())
		require.Equal(t, http.StatusOK, code)
	})
}

// The same when the SUCCESS comes from a status lookup (here one a lookup
// hint asked for): the task that runs Settle is the one that delivers the
// lookup's result, and on its second run the cancel arrives with it.
func TestOperatorCancelDuringLocalSettleOfALookupKeepsMoneyAndStockTogether(t *testing.T) {
	t.Parallel()
	cancelDuringLocalSettle(t, "lset-0002", func(s *testenv.Stack, id, key string) {
		require.NoError(t, testenv.Temporal(t).SignalWorkflow(context.Background(), id, "", workflows.LookupHintSignal,
			workflows.LookupHint{TransactionKey: key, Status: gateway.StatusSuccess}))
	})
}

// The same when the callback reaches the workflow while the create is
// still waiting for the gateway's answer (the gateway calls back before it
// answers): the task that delivers the create's answer settles the waiting
// callback, and on its second run the cancel arrives with the create's
// answer. The test holds the order's reservation row, which only Settle
// writes after Reserve.
func TestOperatorCancelDuringLocalSettleOfAnEarlyCallbackKeepsMoneyAndStockTogether(t *testing.T) {
	t.Parallel()
	f := testenv.Processing(100 * time.Millisecond)
	f.Latency = slowAnswers
	s := testenv.NewStack(t, f, waitsForTheAnswer)
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	placeOrder(t, s, "lset-0003", "P1", 2)
	testenv.Eventually(t, 30*time.Second, func() bool {
		o, err := s.Store.GetOrder(ctx, "lset-0003")
		return err == nil && o.Reservation == store.ReservationHeld
	}, "stock reserved")
	release := testenv.HoldRows(t, s.Store.Pool(), `SELECT * FROM reservations WHERE order_id = 'lset-0003' FOR UPDATE`)

	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "Settle blocked on the reservation row")
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID("lset-0003")
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	release()
	checkMoneyAndStock(t, s, tc, "lset-0003")
}

// cancelDuringLocalSettle resolves a PENDING order's charge SUCCESS at the
// gateway, lets answer deliver it while the test holds the order's row, and
// cancels the workflow while its Settle waits for the row.
func cancelDuringLocalSettle(t *testing.T, orderID string, answer func(s *testenv.Stack, workflowID, key string)) {
	s, o := pendingOrder(t, orderID)
	ctx := context.Background()
	key := o.TransactionKey
	testenv.Resolve(t, s.Sim, key, gateway.StatusSuccess, "", false)

	release := testenv.HoldRows(t, s.Store.Pool(), `SELECT * FROM orders WHERE order_id = $1 FOR UPDATE`, orderID)

	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	answer(s, id, key)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "Settle blocked on the order row")
	// Once CancelWorkflow returns, the server holds the request (buffered
	// while the task runs: it is not in the history yet). The row is released
	// within the task's first 8 s: the SDK heartbeats a task whose local
	// activities run longer, which would hand the workflow the cancel while
	// Settle is still running.
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	release()

	checkMoneyAndStock(t, s, tc, orderID)
}

// checkMoneyAndStock waits for the order's workflow to end and holds the
// order, the gateway and the stock to one story (requireMoneyAndStockAgree),
// a CONFIRMED order's charge not refunded.
func checkMoneyAndStock(t *testing.T, s *testenv.Stack, tc client.Client, orderID string) {
	ctx := context.Background()
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	runErr := tc.GetWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "").Get(waitCtx, nil)
	t.Logf("workflow ended: %v", runErr)

	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	gw := s.Sim.Stats().Orders[orderID]
	if got.Status == status.OrderConfirmed {
		assert.Zero(t, gw.Refunded, "a CONFIRMED order's charge was refunded: goods sold, money returned")
	}
	requireMoneyAndStockAgree(t, got, gw, stockOf(t, s, "P1"), runErr)
}
