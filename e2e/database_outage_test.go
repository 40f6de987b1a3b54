package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// PostgreSQL refusing a step's writes for a while: the workflow waits the
// outage out and the order ends as if there had been none.

// The database refuses the first writes of the create's attempt record — a
// PostgreSQL outage as the create starts, longer than three quick tries
// would last. Nothing was sent, so the create waits the database out and
// the order ends CONFIRMED with one create.
func TestDatabaseFailingAsTheCreateStartsIsWaitedOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(100*time.Millisecond), nil)
	setStock(t, s, "P1", 5)
	testenv.FailFirst(t, s.Store.Pool(), 4, "INSERT", "payment_attempts", "")
	placeOrder(t, s, "db-0001", "P1", 2)
	o := waitOrder(t, s, "db-0001", status.OrderConfirmed, 30*time.Second)
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Equal(t, 1, s.Sim.Stats().Orders["db-0001"].CreateRequests)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
}

// The database refuses the local Settle's write for longer than its local
// tries last: the step goes on as a regular activity, and the workflow
// waits the outage out and confirms.
func TestDatabaseFailingDuringALocalSettleIsWaitedOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(100*time.Millisecond), nil)
	setStock(t, s, "P1", 5)
	// Six refusals: five local tries, then the regular activity's first try;
	// its retry half a second later succeeds.
	testenv.FailFirst(t, s.Store.Pool(), 6, "UPDATE", "reservations", "")
	placeOrder(t, s, "lout-0001", "P1", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID("lout-0001")
	var st workflows.State
	require.NoError(t, tc.GetWorkflow(ctx, id, "").Get(ctx, &st))
	assert.Equal(t, status.OrderConfirmed, st.Status)
	o, err := s.Store.GetOrder(ctx, "lout-0001")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, o.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
	assert.Equal(t, 1, s.Sim.Stats().Orders["lout-0001"].Successful)
	// The local tries (0.5, 1, 2, 4 s apart, inside the task) are spent by
	// the fifth refusal; the step goes on as a regular Settle activity,
	// whose retry is the server's and costs the history nothing. Tries on
	// server timers would cost six events each: about 17,000 a day of
	// outage at the 30 s interval.
	var events, regularSettles int
	for iter := tc.GetWorkflowHistory(ctx, id, "", false, 0); iter.HasNext(); events++ {
		e, err := iter.Next()
		require.NoError(t, err)
		if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "Settle" {
			regularSettles++
		}
	}
	assert.Equal(t, 1, regularSettles, "the Settle still failing after its local tries goes on as a regular activity")
	t.Logf("history: %d events", events)
}
