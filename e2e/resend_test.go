package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Every order the customer wants reaches the gateway's decision before its
// deadline: a flaky gateway's 500s are re-sent by proof (a lookup by order
// id found nothing) as often as the deadline allows, a dead gateway is
// waited out, and no create leaves after the deadline.

// Five creates in a row answered 500 (complete bodies: nothing in flight)
// are each followed by a lookup and a re-send, more than --request-attempts
// used to allow: the sixth is accepted and the order CONFIRMED, charged once.
func TestRepeated500sAreResentUntilAccepted(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 10)
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"failNext": 5, "errorStatus": 500}})
	const id = "resend-500s"
	placeOrder(t, s, id, "P1", 1, "--deadline", "40s")
	testenv.Eventually(t, 35*time.Second, func() bool { return len(s.Sim.Stats().Orders[id].Transactions) > 0 }, "a create accepted")
	testenv.Resolve(t, s.Sim, s.Sim.Stats().Orders[id].Transactions[0], "SUCCESS", "", true)
	waitOrder(t, s, id, status.OrderConfirmed, 20*time.Second)
	st := s.Sim.Stats().Orders[id]
	assert.Equal(t, 6, st.CreateRequests, "five 500s, then the accepted create")
	assert.Len(t, st.Transactions, 1, "charged once")
	assert.Equal(t, int64(9), stockOf(t, s, "P1").Available)
}

// An order placed while the gateway is down holds its stock and sends its
// create when the gateway comes back, past more connect errors than
// --request-attempts: it is charged then, not cancelled.
func TestDeadGatewayIsWaitedOut(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 10)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	const id = "dead-gateway"
	placeOrder(t, s, id, "P1", 1, "--deadline", "60s")
	unreachable := func() int {
		attempts, err := s.Store.Attempts(context.Background(), id)
		require.NoError(t, err)
		n := 0
		for _, a := range attempts {
			if a.Outcome == store.OutcomeUnreachable {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 40*time.Second, func() bool { return unreachable() > s.Config.RequestAttempts },
		"more connect errors than --request-attempts, the order still open")
	o, err := s.Store.GetOrder(context.Background(), id)
	require.NoError(t, err)
	require.False(t, o.Status.Final(), "the order waits for the gateway: %s", o.Status)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(s.Sim.Stats().Orders[id].Transactions) > 0 }, "the create sent once the gateway is back")
	testenv.Resolve(t, s.Sim, s.Sim.Stats().Orders[id].Transactions[0], "SUCCESS", "", true)
	waitOrder(t, s, id, status.OrderConfirmed, 20*time.Second)
}

// A create held back by the open request breaker does not outlive the
// order's deadline: at the deadline the order is compensated, its stock
// released, and no create of it ever reaches the gateway.
func TestNoCreateLeavesAfterTheDeadline(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 10)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	// Trip the request breaker with orders of their own.
	for _, id := range []string{"trip-1", "trip-2", "trip-3", "trip-4", "trip-5", "trip-6"} {
		placeOrder(t, s, id, "P1", 1, "--deadline", "5m")
	}
	testenv.Eventually(t, 40*time.Second, func() bool {
		m, err := loadgen.ScrapeBreakerTransitions(context.Background(), s.MetricsURL())
		require.NoError(t, err)
		return m[activities.CreateBreakerName+"|closed|open"] > 0
	}, "the request breaker open")
	const id = "deadline-bound"
	placeOrder(t, s, id, "P1", 1, "--deadline", "6s")
	// Compensated while the gateway is still down: not when it returns.
	waitOrder(t, s, id, status.OrderCancelled, 20*time.Second)
	_ = testenv.Temporal(t).GetWorkflow(context.Background(), workflows.PaymentWorkflowID(id), "").Get(context.Background(), nil)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders["trip-1"].CreateRequests > 0 },
		"the other orders' creates go out once the gateway is back")
	assert.Zero(t, s.Sim.Stats().Orders[id].CreateRequests, "no create of the order after its deadline")
	attempts, err := s.Store.Attempts(context.Background(), id)
	require.NoError(t, err)
	for _, a := range attempts {
		assert.NotEqual(t, store.OutcomeAccepted, a.Outcome)
	}
}
