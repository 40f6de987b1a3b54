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

// A create whose sender was overtaken (it stalled past its workflow task,
// and a compensation cancelled the order and closed the attempt) answers
// after the order ended. The charge it made is undone by the sender itself:
// no workflow is left to see it, and the callback may be lost.
func TestCreateAnsweredAfterTheOrderWasCancelledIsUndoneByItsSender(t *testing.T) {
	for _, tc := range []struct {
		name string
		read time.Duration // the client's read timeout
		// what the sender answers: its acceptance is refused; UNKNOWN is
		// what the cancel recorded already
		answer string
		tune   func(*simulator.Faults)
	}{
		{"accepted", 5 * time.Second, activities.ErrIllegalTransition, func(f *simulator.Faults) {
			f.Latency = simulator.Range{Min: simulator.Duration(time.Second), Max: simulator.Duration(time.Second)}
		}},
		{"outcome unknown", 2 * time.Second, activities.ErrGatewayOutcomeUnknown, func(f *simulator.Faults) {
			// The gateway takes the create and answers after the read timeout.
			f.Create.TimeoutRate, f.Create.TimeoutDelay = 1, simulator.Duration(4*time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testenv.QuietFaults()
			tc.tune(&f)
			r := newRig(t, f, activities.DefaultBreakerSettings(), false)
			client, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL(), ConnectTimeout: time.Second, ReadTimeout: tc.read})
			require.NoError(t, err)
			t.Cleanup(client.Close)
			acts := activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway"}, observer{r})
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(acts)
			r.reserve(t, "late-1")

			sent := make(chan error, 1)
			go func() {
				_, err := env.ExecuteActivity(acts.RequestPayment, request("late-1"))
				sent <- err
			}()
			testenv.Eventually(t, 10*time.Second, func() bool {
				list := r.attempts(t, "late-1")
				return len(list) == 1 && list[0].State == "SENDING"
			}, "create on the wire")
			// The compensation: it searched the gateway before the create
			// reached it, and found nothing.
			ctx := context.Background()
			require.NoError(t, r.store.Cancel(ctx, store.Change{OrderID: "late-1", Order: status.OrderCancelled, Payment: status.PaymentCancelled,
				Reservation: store.ReleaseReservation, Cause: "cancelled by an operator"}, true))

			typ, _ := appError(t, <-sent)
			assert.Equal(t, tc.answer, typ)
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
