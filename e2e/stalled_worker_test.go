package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A worker stalled (SIGSTOP: a paused VM or container) inside its create
// while an operator cancels and a second worker takes the workflow up.

// A worker is stalled inside the first workflow task's create, past the
// task's timeout: its BeginAttempt holds the order's row lock with the
// attempt not yet committed. An operator cancels, and a second worker runs
// the task again. Then the stalled worker resumes and commits the attempt,
// long past its send window (activities.SendWindow): its create never
// leaves, so nothing can be charged behind the compensation. The order ends
// CANCELLED with nothing sent, money and stock agreeing.
func TestWorkerStalledMidCreateThenCancelledLeavesNoCharge(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Callback.DropRate = 1
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	// A read timeout long enough that the stalled create's deadline has not
	// passed when it resumes (after the second run's wait below): only the send window holds it. Each worker keeps its own breakers:
	// a fleet breaker's lease, held by the frozen worker, would hold the
	// second's start for the lease's length.
	w := newWorkerProcess(t, sim.GatewayURL(), dbURL, "--read-timeout", "60s", "--unknown-grace", "61s", "--poll-initial", "1m", "--poll-max", "1m",
		"--breaker-scope", "process")
	first := w.start()

	ctx := context.Background()
	st := w.stockedStore(ctx)
	release := testenv.BlockWrites(t, st.Pool(), "INSERT", "payment_attempts")
	orderID := testenv.ID("stall")
	w.placeOrder(ctx, orderID)
	testenv.WaitLockWaiters(t, st.Pool(), 1, "advisory", "the first worker's BeginAttempt")
	resume := freeze(t, first) // registered after release's cleanup, so it runs first: DROP TRIGGER waits for the frozen transaction

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
	gw := sim.Stats().Orders[orderID]
	stock, err := st.GetStock(ctx, "P1")
	require.NoError(t, err)
	assert.Zero(t, gw.CreateRequests, "a create resumed past its send window is not sent")
	requireMoneyAndStockAgree(t, o, gw, stock, runErr)
}

// A worker is stalled with its create committed SENDING and on the wire,
// not yet at the gateway (a proxy holds it). An operator cancels; a second worker runs the first task
// again: its compensation searches the gateway by order id (nothing yet),
// and its CancelOrder is delayed (the database refuses it a while: a
// blip). Meanwhile the first worker resumes and its create reaches the
// gateway and is answered: the attempt is still SENDING and the order open,
// so the answer is recorded as any other (order PENDING, payment PENDING
// with its key). CancelOrder, told when the search was made, refuses: the
// compensation searches again and refunds the charge. A cancel that went
// through would end the order CANCELLED with the customer charged: the
// callback is lost and no sweep runs.
func TestStaleCreateAnsweredBetweenTheSearchAndCancelOrder(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults() // processed at once, SUCCESS
	f.Callback.DropRate = 1
	sim := testenv.Pgsim(t, f)
	target, err := url.Parse(sim.GatewayURL())
	require.NoError(t, err)
	hold := make(chan struct{})
	var held atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/payments" {
			held.Add(1)
			<-hold
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)

	dbURL := testenv.NewDatabase(t)
	w := newWorkerProcess(t, sim.GatewayURL(), dbURL, "--read-timeout", "300s", "--unknown-grace", "301s", "--poll-initial", "1m", "--poll-max", "1m", "--reconcile-interval", "0",
		"--breaker-scope", "process") // a fleet lease held by the stopped worker would hold up the second's start
	second := w.sibling()
	env := map[string]string{}
	for k, v := range w.env {
		env[k] = v
	}
	second.env = env
	w.env["GATEWAY_URL"] = proxy.URL // the first worker's creates go through the proxy
	first := w.start()
	ctx := context.Background()
	st := w.stockedStore(ctx)

	orderID := testenv.ID("search-gap")
	w.placeOrder(ctx, orderID)
	onTheWire(t, st, orderID, func() bool { return held.Load() == 1 }, "create SENDING, held on the wire")
	resume := freeze(t, first)

	// The database refuses the compensation's release of the stock for a while.
	heal := testenv.FailFirst(t, st.Pool(), 1000000, "UPDATE", "reservations", "NEW.state = 'RELEASED'")
	healed := false
	t.Cleanup(func() {
		if !healed {
			heal()
		}
	})

	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	second.start()
	testenv.Eventually(t, 150*time.Second, func() bool {
		var n int64
		err := st.Pool().QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM fault_reservations`).Scan(&n)
		return err == nil && n >= 1
	}, "the second run's compensation searched the gateway and tries CancelOrder")
	require.Zero(t, sim.Stats().Orders[orderID].CreateRequests, "the search found nothing: the create is still held")

	resume()
	release()
	testenv.Eventually(t, 60*time.Second, func() bool {
		o, err := st.GetOrder(ctx, orderID)
		list, _ := st.Attempts(ctx, orderID)
		return err == nil && len(list) == 1 && list[0].State == "ANSWERED" && o.Status != ""
	}, "the stale create answered and recorded")
	o, err := st.GetOrder(ctx, orderID)
	require.NoError(t, err)
	t.Logf("after the late answer: order %s payment %s key %q", o.Status, o.PaymentStatus, o.TransactionKey)
	heal()
	healed = true

	workflowEnd(t, tc, id, 150*time.Second)
	// Give a sender's undo (if any) time to land.
	testenv.Eventually(t, 30*time.Second, func() bool {
		gw := sim.Stats().Orders[orderID]
		return gw.Successful+gw.Refunded > 0
	}, "the gateway processed the charge")
	o, err = st.GetOrder(ctx, orderID)
	require.NoError(t, err)
	gw := sim.Stats().Orders[orderID]
	t.Logf("order %s payment %s key %q reservation %s; gateway %+v", o.Status, o.PaymentStatus, o.TransactionKey, o.Reservation, gw)
	if events, err := st.Events(ctx, orderID); err == nil {
		for _, e := range events {
			t.Logf("event %s %s->%s: %s %v", e.Kind, e.From, e.To, e.Cause, e.Detail)
		}
	}
	require.Equal(t, status.OrderCancelled, o.Status)
	assert.Zero(t, gw.Successful, "a CANCELLED order keeps no charge")
}
