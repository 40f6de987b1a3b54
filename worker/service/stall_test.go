package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A worker is stalled (SIGSTOP: a paused VM or container) inside the first
// workflow task's create, past the task's timeout: its BeginAttempt holds
// the order's row lock with the attempt not yet committed. An operator
// cancels, and a second worker runs the task again. Then the stalled worker
// resumes, commits the attempt and sends the create; the gateway charges it
// and its callback is lost. The second run must not end the order CANCELLED
// with the customer charged: it waits for the first run's step and searches
// the gateway, and a create that lands after the compensation is undone by
// its sender.
func TestWorkerStalledMidCreateThenCancelledLeavesNoCharge(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Callback.DropRate = 1
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	// A read timeout long enough that the stalled create's deadline has not
	// passed when it resumes (after the second run's wait below): it is sent. Each worker keeps its own breakers:
	// a fleet breaker's lease, held by the frozen worker, would hold the
	// second's start for the lease's length.
	w := newWorkerProcess(t, sim, dbURL, "--read-timeout", "60s", "--poll-initial", "1m", "--poll-max", "1m",
		"--breaker-scope", "process")
	first := w.start()

	ctx := context.Background()
	st := w.stockedStore(ctx)
	release := testenv.BlockWrites(t, st.Pool(), "INSERT", "payment_attempts")
	orderID := testenv.ID("stall")
	w.placeOrder(ctx, orderID)
	testenv.WaitLockWaiters(t, st.Pool(), 1, "advisory", "the first worker's BeginAttempt")
	resume := stop(t, first) // registered after release's cleanup, so it runs first: DROP TRIGGER waits for the frozen transaction

	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	w.sibling().start()
	// The second run is held on the order's row lock (its Reserve, or its
	// compensation's CancelOrder) behind the frozen transaction. It comes
	// late: each poll the frozen worker left open on the order queue (two)
	// takes the task first, which then waits out its 10 s timeout.
	testenv.WaitLockWaitersWithin(t, st.Pool(), 2, "", "the second run behind the first's row lock", 50*time.Second)
	resume()
	release()

	runErr := workflowEnd(t, tc, id, 90*time.Second)

	// The charge may be undone a moment after the workflow ends (by the
	// create's own sender): the money is judged once it settles, or after
	// 30 s.
	var o store.Order
	settled := func() bool {
		var err error
		o, err = st.GetOrder(ctx, orderID)
		require.NoError(t, err)
		return (o.Status == status.OrderConfirmed) == (sim.Stats().Orders[orderID].Successful == 1)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(30 * time.Second); !settled(); {
		select {
		case <-tick.C:
			continue
		case <-deadline:
		}
		break
	}
	requireOneCreateMatched(t, st, sim, o, runErr)
}
