package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Faults that land inside a step, on the real stack: the dev server, a real
// database (faults injected in it by the test) and pgsim.

func temporalClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalAddress(t), Namespace: "default"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// The database refuses the first writes of the create's attempt record — a
// PostgreSQL outage as the create starts, longer than the create's old
// three tries. Nothing was sent, so the create waits the database out and
// the order ends CONFIRMED with one create.
func TestDatabaseFailingAsTheCreateStartsIsWaitedOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(100*time.Millisecond), nil)
	setStock(t, s, 5)
	_, err := s.Store.Pool().Exec(context.Background(), `
		CREATE SEQUENCE outage;
		CREATE FUNCTION outage() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('outage') <= 4 THEN RAISE EXCEPTION 'injected: the database is unavailable'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER outage BEFORE INSERT ON payment_attempts FOR EACH ROW EXECUTE FUNCTION outage();`)
	require.NoError(t, err)
	placeOrder(t, s, "db-1")
	o := waitStatus(t, s, "db-1", status.OrderConfirmed)
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Equal(t, 1, s.Sim.Stats().Orders["db-1"].CreateRequests)
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
	lock, err := s.Store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `SELECT * FROM products WHERE product_id = 'P1' FOR UPDATE`)
	require.NoError(t, err)

	placeOrder(t, s, "res-1")
	testenv.Eventually(t, 30*time.Second, func() bool {
		var waiting int
		err := s.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, "Reserve blocked on the product row")

	out, err := s.Starter(ctx, "cancel", "res-1", "--wait=false")
	require.NoError(t, err, out)
	tc := temporalClient(t)
	// Hold the lock until the workflow has handled the cancel and every
	// activity it started because of it has finished: a workflow that does not
	// wait for Reserve has compensated by then.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return cancelHandled(t, tc, workflows.PaymentWorkflowID("res-1"))
	}, "cancel handled")
	require.NoError(t, lock.Rollback(ctx))

	run := tc.GetWorkflow(ctx, workflows.PaymentWorkflowID("res-1"), "")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = run.Get(waitCtx, nil) // ends cancelled
	// Reserve commits once the lock is gone, whatever the workflow did.
	var o store.Order
	testenv.Eventually(t, 10*time.Second, func() bool {
		o, err = s.Store.GetOrder(ctx, "res-1")
		return err == nil
	}, "Reserve committed")
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
	assert.Zero(t, s.Sim.Stats().Requests["create"], "nothing was sent")
}

// cancelHandled: the cancel request reached the workflow's Reserve, and
// every other activity scheduled so far has ended.
func cancelHandled(t *testing.T, tc client.Client, workflowID string) bool {
	iter := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	requested, open := false, map[int64]bool{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			requested = true
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
