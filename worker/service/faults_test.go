package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// Faults that land inside a step, on the real stack: the dev server, a real
// database (faults injected in it by the test) and pgsim.

func temporalClient(t *testing.T) client.Client {
	t.Helper()
	return testenv.Temporal(t)
}

// The database refuses the first writes of the create's attempt record — a
// PostgreSQL outage as the create starts, longer than the create's old
// three tries. Nothing was sent, so the create waits the database out and
// the order ends CONFIRMED with one create.
func TestDatabaseFailingAsTheCreateStartsIsWaitedOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(100*time.Millisecond), nil)
	setStock(t, s, 5)
	testenv.FailFirst(t, s.Store.Pool(), 4, "INSERT", "payment_attempts", "")
	placeOrder(t, s, "db-0001")
	o := waitStatus(t, s, "db-0001", status.OrderConfirmed)
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Equal(t, 1, s.Sim.Stats().Orders["db-0001"].CreateRequests)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock(t, s))
}

// An operator cancels while Reserve is blocked in the database (the test
// holds the product's row lock). Compensation must wait for Reserve to end:
// the stock it reserves is then released, never left held with no workflow.
func TestOperatorCancelDuringReserveReleasesTheStock(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	ctx := context.Background()
	release := testenv.HoldRows(t, s.Store.Pool(), `SELECT * FROM products WHERE product_id = 'P1' FOR UPDATE`)

	placeOrder(t, s, "res-0001")
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "Reserve blocked on the product row")

	out, err := starter(ctx, s, "cancel", "res-0001", "--wait=false")
	require.NoError(t, err, out)
	tc := temporalClient(t)
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
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
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

// A callback for an order that is not final but whose workflow is not
// running cannot be applied: the worker must answer 5xx so the gateway
// retries, never 200, and keep a record of it.
func TestCallbackThatCannotBeDeliveredIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	ctx := context.Background()
	// An order in the database with no workflow (it was terminated).
	_, err := s.Store.Reserve(ctx, store.NewOrder{OrderID: "orphan-1", ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u1"})
	require.NoError(t, err)
	require.NoError(t, s.Store.Advance(ctx, store.Change{OrderID: "orphan-1", Order: status.OrderPending, Payment: status.PaymentPending,
		TransactionKey: "tx-orphan", Cause: "gateway accepted"}))

	code, answer := postCallback(t, s, callbackBody("orphan-1", "tx-orphan", gateway.StatusSuccess, 5000), testenv.Secret, time.Now())
	assert.Equal(t, 503, code, "the gateway must retry")
	assert.False(t, answer.Accepted)
	events, err := s.Store.Events(ctx, "orphan-1")
	require.NoError(t, err)
	var kept bool
	for _, e := range events {
		kept = kept || (e.Kind == store.KindCallback && e.Detail["status"] == gateway.StatusSuccess)
	}
	assert.True(t, kept, "the undeliverable callback is on the order's record")
}

// Key mode: create #1 reaches the gateway (a transaction is made) but its
// answer times out (UNKNOWN, keyed: retried). The gateway then goes down: #2
// and #3 are UNREACHABLE. That proves nothing about #1: the order must be
// looked up, never compensated as "nothing was charged" while #1 charges the
// card (its callback is lost).
func TestKeyedUnknownThenUnreachableIsStillLookedUp(t *testing.T) {
	t.Parallel()
	keyedUnknownThen(t, "key-down", map[string]any{"down": true})
}

// The same with a 429 (rate limited, answered before the gateway looks at
// the key) on the keyed retries: never "payment failed" while #1 may charge.
func TestKeyedUnknownThen429IsStillLookedUp(t *testing.T) {
	t.Parallel()
	keyedUnknownThen(t, "key-429", map[string]any{"create": map[string]any{"failNext": 5, "errorStatus": 429}})
}

func keyedUnknownThen(t *testing.T, orderID string, fault map[string]any) {
	f := processing(300 * time.Millisecond)
	f.Callback.DropRate = 1
	f.Create.TimeoutRate = 1
	f.Create.TimeoutDelay = simulator.Duration(10 * time.Second)
	s := testenv.NewStack(t, f, func(c *service.Config) { c.IdempotencyKeys = true })
	setStock(t, s, 5)
	placeOrder(t, s, orderID)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders[orderID].CreateRequests >= 1 }, "create #1 at the gateway")
	require.Equal(t, http.StatusOK, testenv.Admin(t, s.Sim, http.MethodPatch, "/admin/faults", fault, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The gateway heals once the create's budget is spent, so the order can
	// be looked up.
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) == 3 && list[2].State == "ANSWERED"
	}, "three creates answered")
	require.Equal(t, http.StatusOK, testenv.Admin(t, s.Sim, http.MethodPatch, "/admin/faults",
		map[string]any{"down": false, "create": map[string]any{"failNext": 0, "errorStatus": 500}}, nil))

	tc := temporalClient(t)
	var st workflows.State
	require.NoError(t, tc.GetWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "").Get(ctx, &st))

	o, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	attempts, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	for _, a := range attempts {
		t.Logf("attempt #%d %s %s", a.No, a.Outcome, a.Detail)
	}
	gw := s.Sim.Stats().Orders[orderID]
	t.Logf("order %s payment %s; gateway: %+v", o.Status, o.PaymentStatus, gw)
	assert.Equal(t, status.OrderConfirmed, o.Status, "the charge #1 made is found and confirms the order")
	assert.Equal(t, 1, gw.Successful)
	assert.Len(t, gw.Transactions, 1, "one transaction whatever was retried under the key")
}

// An operator cancels while the create is in flight and the gateway answers
// 4xx: the refusal is recorded (payment FAILED), and the order must end
// FAILED with its stock released — not a failed workflow with the order
// REQUESTING and the stock HELD for ever (compensation once asked for the
// illegal FAILED -> CANCELLED), nor a workflow ended cancelled over a FAILED
// order (the task that settled the refusal is refused its completion while
// the cancel waits, and its run again from the history met the cancel first:
// money-safety version 4 ends that run as the refusal did).
func TestCancelDuringARejectedCreateReleasesTheStock(t *testing.T) {
	t.Parallel()
	f := processing(time.Hour)
	f.Create.FailNext = 1
	f.Create.ErrorStatus = 400
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, 5)
	ctx := context.Background()
	release := testenv.BlockWrites(t, s.Store.Pool(), "INSERT", "payment_attempts")

	orderID := testenv.ID("rej")
	placeOrder(t, s, orderID)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", "the create blocked as it starts")
	// CancelWorkflow returns once the server has recorded the cancel (the
	// starter's cancel would then query the workflow, which waits for the
	// task the create runs in). The create is a local activity (money-safety
	// version 3), so the workflow sees the cancel only when that task
	// completes — with the create's answer, or in a run of the task again
	// from its history. The create is released now, well inside its timeout;
	// waiting for the cancel to show in the history would wait for the task's
	// heartbeat, past that timeout.
	tc := temporalClient(t)
	require.NoError(t, tc.CancelWorkflow(ctx, workflows.PaymentWorkflowID(orderID), ""))
	release()

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	werr := tc.GetWorkflow(waitCtx, workflows.PaymentWorkflowID(orderID), "").Get(waitCtx, nil)
	t.Logf("workflow ended: %v", werr)
	assert.True(t, cancelSeen(t, tc, workflows.PaymentWorkflowID(orderID)), "the workflow saw the cancel:\n%s", historySummary(t, tc, workflows.PaymentWorkflowID(orderID)))
	o, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	assert.NoError(t, werr, "the refusal settles the order FAILED, cancel or not")
	assert.Equal(t, status.OrderFailed, o.Status, "payment %s", o.PaymentStatus)
	assert.NotEqual(t, store.ReservationHeld, o.Reservation, "stock held with no workflow")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
}
