package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// sendSlowly starts the order's create through a client that waits read
// for the gateway's answer (the rig's waits 300 ms), and returns once the
// create is on the wire; the channel yields the activity's error.
func (r *rig) sendSlowly(t *testing.T, orderID string, read time.Duration) <-chan error {
	t.Helper()
	client, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL(), ConnectTimeout: time.Second, ReadTimeout: read})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	acts := activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway"}, observer{r})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	sent := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(acts.RequestPayment, request(orderID))
		sent <- err
	}()
	testenv.Eventually(t, 10*time.Second, func() bool {
		list := r.attempts(t, orderID)
		return len(list) == 1 && list[0].State == "SENDING"
	}, "create on the wire")
	return sent
}

// A create whose sender was overtaken (it stalled past its workflow task,
// and a compensation cancelled the order and closed the attempt) answers
// after the order ended. The charge it made is undone by the sender itself:
// no workflow is left to see it, and the callback may be lost.
func TestCreateAnsweredAfterTheOrderWasCancelledIsUndoneByItsSender(t *testing.T) {
	for _, tc := range []struct {
		name string
		read time.Duration // the client's read timeout
		tune func(*simulator.Faults)
	}{
		{"accepted", 5 * time.Second, func(f *simulator.Faults) {
			f.Latency = simulator.Range{Min: simulator.Duration(time.Second), Max: simulator.Duration(time.Second)}
		}},
		{"outcome unknown", 2 * time.Second, func(f *simulator.Faults) {
			// The gateway takes the create and answers after the read timeout.
			f.Create.TimeoutRate, f.Create.TimeoutDelay = 1, simulator.Duration(4*time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testenv.QuietFaults()
			tc.tune(&f)
			r := newRig(t, f, activities.DefaultBreakerSettings(), false)
			r.reserve(t, "late-1")
			sent := r.sendSlowly(t, "late-1", tc.read)
			// The compensation: it searched the gateway before the create
			// reached it, and found nothing.
			ctx := context.Background()
			require.NoError(t, r.store.Cancel(ctx, store.Change{OrderID: "late-1", Order: status.OrderCancelled, Payment: status.PaymentCancelled,
				Reservation: store.ReleaseReservation, Cause: "cancelled by an operator"}, store.CancelCheck{}))

			typ, _ := appError(t, <-sent)
			assert.Equal(t, activities.ErrIllegalTransition, typ, "the late answer is refused")
			gw := r.sim.Stats().Orders["late-1"]
			t.Logf("gateway %+v", gw)
			assert.Zero(t, gw.Successful, "no charge stands on a CANCELLED order")
			o := r.payment(t, "late-1")
			assert.Equal(t, status.OrderCancelled, o.Status)
			if gw.Refunded > 0 {
				assert.Equal(t, status.PaymentRefunded, o.PaymentStatus)
			}
			events, err := r.store.Events(ctx, "late-1")
			require.NoError(t, err)
			var undone bool
			for _, e := range events {
				undone = undone || e.Kind == store.KindAnomaly && e.Cause == "create answered after the order was CANCELLED; cancelled at the gateway by its sender"
			}
			assert.True(t, undone, "the undo is on the order's record")
		})
	}
}

// The order ends FAILED under a create still SENDING (a recovery settles an
// earlier transaction found FAILED; a settle does not close the attempt).
// The create then charges: its answer is recorded but refused for the
// order, and its sender refunds the charge.
func TestCreateAnsweredAfterTheOrderFailedUnderItIsUndone(t *testing.T) {
	f := testenv.QuietFaults() // processed at once, SUCCESS
	f.Latency = simulator.Range{Min: simulator.Duration(2 * time.Second), Max: simulator.Duration(2 * time.Second)}
	r := newRig(t, f, activities.DefaultBreakerSettings(), false)
	r.reserve(t, "late-2")
	sent := r.sendSlowly(t, "late-2", 5*time.Second)
	ctx := context.Background()
	require.NoError(t, r.store.Advance(ctx, store.Change{OrderID: "late-2", Order: status.OrderFailed, Payment: status.PaymentFailed,
		Reason: "LIMIT_EXCEEDED", Reservation: store.ReleaseReservation, Cause: "payment FAILED: found by the recovery"}))

	typ, _ := appError(t, <-sent)
	assert.Equal(t, activities.ErrIllegalTransition, typ)
	gw := r.sim.Stats().Orders["late-2"]
	o := r.payment(t, "late-2")
	t.Logf("order %s payment %s; gateway %+v", o.Status, o.PaymentStatus, gw)
	assert.Equal(t, status.OrderFailed, o.Status)
	assert.Equal(t, 1, gw.Refunded, "the late charge refunded")
	assert.Zero(t, gw.Successful, "no charge stands on a FAILED order")
	assert.Equal(t, status.PaymentRefunded, o.PaymentStatus)
	assert.Equal(t, "ANSWERED", r.attempts(t, "late-2")[0].State, "the attempt does not stay SENDING")
}

// A sender overtaken by a second run's create (which closed its attempt
// and sent nothing) answers after that run found its transaction by order
// id: whether the run confirmed the order with it before or after the
// answer, the order's own charge stands.
func TestALateAnswerNeverRefundsTheChargeTheOrderConfirmed(t *testing.T) {
	for _, confirmFirst := range []bool{true, false} {
		name := map[bool]string{true: "confirmed before the answer", false: "confirmed after the answer"}[confirmFirst]
		t.Run(name, func(t *testing.T) {
			f := testenv.QuietFaults()
			f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
			f.Latency = simulator.Range{Min: simulator.Duration(2 * time.Second), Max: simulator.Duration(2 * time.Second)}
			r := newRig(t, f, activities.DefaultBreakerSettings(), false)
			id := testenv.ID("late-confirmed")
			r.reserve(t, id)
			sent := r.sendSlowly(t, id, 5*time.Second)
			var key string
			testenv.Eventually(t, 10*time.Second, func() bool {
				if st := r.sim.Stats().Orders[id]; len(st.Transactions) == 1 {
					key = st.Transactions[0]
				}
				return key != ""
			}, "create taken by the gateway, its answer held")
			ctx := context.Background()
			b, err := r.store.BeginAttempt(ctx, store.AttemptRequest{OrderID: id, CallbackURL: "http://127.0.0.1:1/callbacks/gateway", Limit: 3})
			require.NoError(t, err)
			require.False(t, b.Send, "the second run's create closes the first and sends nothing")
			confirm := func() {
				require.NoError(t, r.store.Advance(ctx, store.Change{OrderID: id, Payment: status.PaymentPending, TransactionKey: key,
					Cause: "transaction found by lookup"}))
				testenv.Resolve(t, r.sim, key, "SUCCESS", "", false)
				require.NoError(t, r.store.Advance(ctx, store.Change{OrderID: id, Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
					TransactionKey: key, Reservation: store.CommitReservation, Cause: "payment SUCCESS: definitive answer"}))
			}
			if confirmFirst {
				confirm()
			}
			<-sent
			if !confirmFirst {
				confirm()
			}
			gw := r.sim.Stats().Orders[id]
			o := r.payment(t, id)
			assert.Equal(t, status.OrderConfirmed, o.Status)
			assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
			assert.Equal(t, 1, gw.Successful, "the order's own charge stands")
			assert.Zero(t, gw.Refunded)
			assert.Zero(t, gw.Cancelled)
		})
	}
}

// A stale sender's create reaches the gateway after the compensation
// searched it by order id (and found nothing), and its answer is recorded
// before the compensation's CancelOrder: either normally (the attempt still
// SENDING) or refused for an attempt a second run's create had closed, the
// order still open. CancelOrder, told when the search was made, refuses;
// the compensation searches again, finds the charge and refunds it.
func TestAnAnswerAfterTheCompensationsSearchIsSearchedAgain(t *testing.T) {
	for _, secondRunBegan := range []bool{false, true} {
		name := map[bool]string{false: "attempt still SENDING", true: "attempt closed by a second run's create"}[secondRunBegan]
		t.Run(name, func(t *testing.T) {
			f := testenv.QuietFaults() // processed at once, SUCCESS
			f.Callback.DropRate = 1
			r := newRig(t, f, activities.DefaultBreakerSettings(), false)
			id := testenv.ID("search-gap")
			r.reserve(t, id)
			ctx := context.Background()
			search := func() activities.CancelResult {
				v, err := r.env.ExecuteActivity(r.acts.CancelPayments, activities.CancelInput{OrderID: id, UserID: "u1", SearchByOrder: true})
				require.NoError(t, err)
				var res activities.CancelResult
				require.NoError(t, v.Get(&res))
				require.False(t, res.SearchedAt.IsZero())
				return res
			}
			cancelOrder := func(res activities.CancelResult) error {
				payment := status.PaymentCancelled
				if res.Refunded > 0 {
					payment = status.PaymentRefunded
				}
				_, err := r.env.ExecuteActivity(r.acts.CancelOrder, activities.SettleInput{OrderID: id, Payment: payment,
					Cause: "cancelled by an operator", SearchedAt: res.SearchedAt})
				return err
			}
			first := search()
			require.Empty(t, first.Transactions, "nothing at the gateway yet")

			testenv.PatchFaults(t, r.sim, map[string]any{"latency": map[string]any{"min": "1s", "max": "1s"}})
			sent := r.sendSlowly(t, id, 5*time.Second)
			if secondRunBegan {
				b, err := r.store.BeginAttempt(ctx, store.AttemptRequest{OrderID: id, CallbackURL: "http://127.0.0.1:1/callbacks/gateway", Limit: 3})
				require.NoError(t, err)
				require.False(t, b.Send)
			}
			<-sent
			testenv.PatchFaults(t, r.sim, map[string]any{"latency": map[string]any{"min": 0, "max": 0}})
			testenv.Eventually(t, 10*time.Second, func() bool { return r.sim.Stats().Orders[id].Successful == 1 }, "the late create charged")

			typ, _ := appError(t, cancelOrder(first))
			assert.Equal(t, activities.ErrGatewayNotSearched, typ, "the answer came after the search")
			again := search()
			assert.Equal(t, 1, again.Refunded, "the second search finds and refunds the charge")
			require.NoError(t, cancelOrder(again))

			gw := r.sim.Stats().Orders[id]
			o := r.payment(t, id)
			t.Logf("order %s payment %s; gateway %+v", o.Status, o.PaymentStatus, gw)
			assert.Equal(t, status.OrderCancelled, o.Status)
			assert.Equal(t, status.PaymentRefunded, o.PaymentStatus)
			assert.Zero(t, gw.Successful, "no charge stands on a CANCELLED order")
		})
	}
}
