package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/workflows"
)

// Orders that end cancelled: at their deadline, by an operator's cancel,
// and with a charge that came after the cancel refunded.

// The deadline: a payment that never resolves is cancelled at the gateway and
// its stock released when the order's deadline passes.
func TestDeadlineCancelsAtTheGatewayAndReleases(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "dl-0001", "P1", 2, "--deadline", "3s")
	waitOrder(t, s, "dl-0001", status.OrderPending, 30*time.Second)
	assert.Equal(t, int64(3), stockOf(t, s, "P1").Available)
	o := waitOrder(t, s, "dl-0001", status.OrderCancelled, 30*time.Second)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	st := s.Sim.Stats().Orders["dl-0001"]
	assert.Equal(t, 1, st.Cancelled, "cancelled at the gateway")
	assert.Zero(t, st.Successful)
}

// status shows a PENDING order from the workflow and the database; cancel
// compensates it (cancelled at the gateway, stock released), and says so
// when the order has already ended.
func TestStatusWhilePendingAndCancelCompensates(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "pend-1", "P1", 2)
	waitOrder(t, s, "pend-1", status.OrderPending, 30*time.Second)

	v, out := orderView(t, s, "status", "pend-1", "--json")
	assert.Equal(t, status.OrderPending, v.Status)
	assert.Equal(t, status.PaymentPending, v.PaymentStatus)
	assert.NotEmpty(t, v.TransactionKey)
	assert.Equal(t, 1, v.Attempts)
	require.NotNil(t, v.Deadline)
	assert.WithinDuration(t, time.Now().Add(10*time.Minute), *v.Deadline, time.Minute)
	assert.Equal(t, map[string]string{"workflow": "ok", "database": "ok"}, v.Sources)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, field := range []string{"orderId", "status", "paymentStatus", "transactionKey", "attempts", "lastLookup", "deadline"} {
		assert.Contains(t, raw, field)
	}

	out, err := starter(context.Background(), s, "cancel", "pend-1", "--json")
	require.NoError(t, err, out)
	o := waitOrder(t, s, "pend-1", status.OrderCancelled, 30*time.Second)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Equal(t, 1, s.Sim.Stats().Orders["pend-1"].Cancelled)

	_, err = starter(context.Background(), s, "cancel", "pend-1")
	assert.ErrorContains(t, err, "already ended")
	_, err = starter(context.Background(), s, "status", "nobody")
	assert.ErrorContains(t, err, "unknown order")
}

// A SUCCESS the gateway sends after the order was cancelled is refunded,
// and counted once.
func TestLateSuccessForACancelledOrderIsRefunded(t *testing.T) {
	t.Parallel()
	s, o := pendingOrder(t, "late-1")
	_, err := starter(context.Background(), s, "cancel", "late-1")
	require.NoError(t, err)
	waitOrder(t, s, "late-1", status.OrderCancelled, 30*time.Second)
	// The gateway charges anyway, and says so.
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", true)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders["late-1"].Refunded == 1 }, "the late charge refunded at the gateway")
	testenv.Eventually(t, 30*time.Second, func() bool {
		o, err := s.Store.GetOrder(context.Background(), "late-1")
		return err == nil && o.PaymentStatus == status.PaymentRefunded
	}, "payment REFUNDED")
	o, err = s.Store.GetOrder(context.Background(), "late-1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Contains(t, metrics(t, s), "\n"+metricnames.ChargesRefunded+" 1\n", "the refund is counted, once")
}

// An operator cancels while Reserve is blocked in the database (the test
// holds the product's row lock). Compensation must wait for Reserve to end:
// the stock it reserves is then released, never left held with no workflow.
func TestOperatorCancelDuringReserveReleasesTheStock(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	release := testenv.HoldRows(t, s.Store.Pool(), `SELECT * FROM products WHERE product_id = 'P1' FOR UPDATE`)

	placeOrder(t, s, "res-0001", "P1", 2)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "Reserve blocked on the product row")

	out, err := starter(ctx, s, "cancel", "res-0001", "--wait=false")
	require.NoError(t, err, out)
	tc := testenv.Temporal(t)
	// Hold the lock until the workflow has handled the cancel and every
	// activity it started because of it has finished: a workflow that does not
	// wait for Reserve has compensated by then.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return cancelHandled(t, tc, workflows.PaymentWorkflowID("res-0001"))
	}, "cancel handled")
	release()

	run := tc.GetWorkflow(ctx, workflows.PaymentWorkflowID("res-0001"), "")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = run.Get(waitCtx, nil) // ends cancelled
	// Reserve commits once the lock is gone, whatever the workflow did.
	var o store.Order
	testenv.Eventually(t, 10*time.Second, func() bool {
		o, err = s.Store.GetOrder(ctx, "res-0001")
		return err == nil
	}, "Reserve committed")
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Zero(t, s.Sim.Stats().Requests["create"], "nothing was sent")
}

// cancelHandled: the cancel request reached the workflow's Reserve (a
// regular activity's cancel request, or for a local Reserve a workflow task
// completed after the workflow's cancel request: the workflow code has seen
// it), and every other activity scheduled so far has ended.
func cancelHandled(t *testing.T, tc client.Client, workflowID string) bool {
	iter := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	requested, cancelled, open := false, false, map[int64]bool{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			requested = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			cancelled = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			requested = requested || cancelled
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() != "Reserve" {
				open[e.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			delete(open, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			delete(open, e.GetActivityTaskFailedEventAttributes().GetScheduledEventId())
		}
	}
	return requested && len(open) == 0
}
