package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// The lookup breaker open while the gateway already holds SUCCESS: a
// lookup unavailable is not a payment failed. The order keeps its stock
// PENDING while the breaker refuses lookups, confirms on the first trial
// lookup after the open wait, and the trials close the breaker; a FAILED
// payment, for comparison, releases its stock.
func TestLookupUnavailableIsNotPaymentFailed(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) {
		c.Breaker = activities.DefaultBreakerSettings() // 5 calls, 50%, 10 s open, 3 half-open trials
		c.PollInitial, c.PollMax = time.Second, time.Second
	})
	ctx := context.Background()
	// Lookups straight through the worker's activities, which share its breaker with the workflow's.
	var suite testsuite.WorkflowTestSuite
	acts := suite.NewTestActivityEnvironment()
	acts.RegisterActivity(s.Worker.Activities)

	// Stock 5, order quantity 2: available 3.
	setStock(t, s, "P1", 5)
	setStock(t, s, "OTHER", 5)
	placeOrder(t, s, "lkb-order", "P1", 2)
	ours := waitOrder(t, s, "lkb-order", status.OrderPending, 30*time.Second)
	assert.Equal(t, int64(3), stockOf(t, s, "P1").Available)
	placeOrder(t, s, "lkb-other", "OTHER", 1)
	other := waitOrder(t, s, "lkb-other", status.OrderPending, 30*time.Second)

	// Ten 503 answers on another transaction's lookups open the breaker.
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	for range 10 {
		_, err := acts.ExecuteActivity(s.Worker.Activities.LookupPayment, activities.LookupInput{OrderID: "lkb-other", TransactionKey: other.TransactionKey})
		require.Error(t, err)
	}
	require.Equal(t, gobreaker.StateOpen, s.Worker.Breaker.State())
	openedAt := time.Now()
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})

	// The gateway records SUCCESS for our order but sends no callback.
	testenv.Resolve(t, s.Sim, ours.TransactionKey, "SUCCESS", "", false)

	// A lookup of our order while OPEN: payment PENDING, order awaiting payment, available 3.
	testenv.Eventually(t, 8*time.Second, func() bool {
		st := workflowState(t, s, "lkb-order")
		return st.LastLookup != nil && st.LastLookup.Result == "UNAVAILABLE" && st.LastLookup.At.After(openedAt)
	}, "the workflow's lookup refused by the open breaker")
	_, err := acts.ExecuteActivity(s.Worker.Activities.LookupPayment, activities.LookupInput{OrderID: "lkb-order", TransactionKey: ours.TransactionKey})
	var appErr interface{ Type() string }
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrLookupUnavailable, appErr.Type())
	o, err := s.Store.GetOrder(ctx, "lkb-order")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status)
	assert.Equal(t, status.PaymentPending, o.PaymentStatus)
	assert.Equal(t, store.ReservationHeld, o.Reservation)
	assert.Equal(t, int64(3), stockOf(t, s, "P1").Available)

	// After the open wait, the half-open lookup reaches the gateway and sees SUCCESS.
	o = waitOrder(t, s, "lkb-order", status.OrderConfirmed, 20*time.Second)
	t.Logf("confirmed %.1fs after the breaker opened", time.Since(openedAt).Seconds())
	// openedAt is taken just after the breaker opened, so allow a little slack.
	assert.GreaterOrEqual(t, time.Since(openedAt), 9*time.Second, "not before the open wait")
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
	assert.Equal(t, 1, s.Sim.Stats().Orders["lkb-order"].CreateRequests, "the gateway saw exactly one create")

	// The trial lookups succeed and close the breaker; a second identical
	// lookup changes nothing. The workflows' own polls take trials too: a
	// lookup of ours refused while theirs are under way is tried again.
	testenv.Eventually(t, 10*time.Second, func() bool {
		if s.Worker.Breaker.State() == gobreaker.StateClosed {
			return true
		}
		_, err := acts.ExecuteActivity(s.Worker.Activities.LookupPayment, activities.LookupInput{OrderID: "lkb-order", TransactionKey: ours.TransactionKey})
		var refused interface{ Type() string }
		if err != nil && !(errors.As(err, &refused) && refused.Type() == activities.ErrLookupUnavailable) {
			require.NoError(t, err)
		}
		return s.Worker.Breaker.State() == gobreaker.StateClosed
	}, "the trials closed the breaker")
	after, err := s.Store.GetOrder(ctx, "lkb-order")
	require.NoError(t, err)
	assert.Equal(t, o.Status, after.Status)
	assert.Equal(t, o.PaymentStatus, after.PaymentStatus)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
	assert.Equal(t, 1, s.Sim.Stats().Orders["lkb-order"].CreateRequests)

	// The comparison case: a confirmed FAILED releases the reservation.
	setStock(t, s, "P3", 5)
	placeOrder(t, s, "lkb-failed", "P3", 2)
	failing := waitOrder(t, s, "lkb-failed", status.OrderPending, 30*time.Second)
	assert.Equal(t, int64(3), stockOf(t, s, "P3").Available)
	testenv.Resolve(t, s.Sim, failing.TransactionKey, "FAILED", "LIMIT_EXCEEDED", false)
	failed := waitOrder(t, s, "lkb-failed", status.OrderFailed, 20*time.Second)
	assert.Equal(t, status.PaymentFailed, failed.PaymentStatus)
	assert.Equal(t, "LIMIT_EXCEEDED", failed.PaymentReason)
	assert.Equal(t, store.Stock{ProductID: "P3", Total: 5, Available: 5}, stockOf(t, s, "P3"))
}
