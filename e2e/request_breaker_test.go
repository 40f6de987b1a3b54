package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
)

// Creates during an outage, on the real stack: creates the gateway takes
// and never answers in time trip the request breaker; while it is open the
// gateway sees no create at all; once the gateway heals the held-back
// orders resume and every one ends CONFIRMED with exactly one transaction —
// none created twice, none charged twice.
func TestCreatesWaitOutTheRequestBreakerAndResumeOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(100*time.Millisecond), func(c *service.Config) {
		c.RequestBreaker = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 3, FailureRate: 0.5, OpenFor: 5 * time.Second, HalfOpenCalls: 1}
		// No re-send of an unknown create before the breaker has opened.
		c.UnknownGrace = 5 * time.Second
	})
	setStock(t, s, "P1", 100)
	// The gateway creates each transaction and answers only after the read
	// timeout: each create's outcome is unknown to payguard (its lookup
	// finds the transaction), and counts against the request breaker.
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"timeoutRate": 1, "timeoutDelay": "10s"}})
	var orders []string
	place := func(i int) {
		id := fmt.Sprintf("rqbrk-%d", i)
		orders = append(orders, id)
		placeOrder(t, s, id, "P1", 2)
	}
	// Three creates one after the other, each timed out before the next
	// goes out, trip it: no create is in flight when it opens.
	for i := range 3 {
		place(i)
		testenv.Eventually(t, 30*time.Second, func() bool { return createTimedOut(t, s.Store, orders[i]) }, orders[i]+" create timed out")
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return breakerState(t, s.Worker.Addr(), activities.CreateBreakerName) == 2 }, "request breaker OPEN")
	openSeen := time.Now()
	// Three more orders while it is open.
	for i := 3; i < 6; i++ {
		place(i)
	}

	// While it stays open, nothing reaches the gateway: watched for most of
	// its 5 s (it opened before openSeen; the margin covers that lag, after
	// which one half-open trial may go out).
	sent := s.Sim.Stats().Requests["create"]
	require.Equal(t, 3, sent)
	testenv.Eventually(t, 30*time.Second, func() bool {
		require.Equal(t, sent, s.Sim.Stats().Requests["create"], "a create reached the gateway while the request breaker was open")
		return time.Since(openSeen) > 3500*time.Millisecond
	}, "watched the open request breaker")
	assert.Positive(t, refusals(t, s, "create", gobreaker.StateOpen), "creates refused by the open breaker, timed in "+metricnames.BreakerRefusalDuration)

	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})
	for _, id := range orders {
		testenv.Eventually(t, time.Minute, func() bool {
			o, err := s.Store.GetOrder(context.Background(), id)
			return err == nil && o.Status == status.OrderConfirmed
		}, id+" CONFIRMED after the gateway healed")
		got := s.Sim.Stats().Orders[id]
		assert.Len(t, got.Transactions, 1, "%s: one transaction at the gateway", id)
		assert.Equal(t, 1, got.Successful, "%s: charged once", id)
	}
	assert.Zero(t, stockOf(t, s, "P1").Reserved)
}

// createTimedOut: the order's first create is recorded with an unknown
// outcome (the read timeout).
func createTimedOut(t *testing.T, st *store.Store, orderID string) bool {
	t.Helper()
	list, err := st.Attempts(context.Background(), orderID)
	require.NoError(t, err)
	return len(list) > 0 && list[0].Outcome == store.OutcomeUnknown
}

// refusals is how many calls to endpoint the worker's breakers refused in
// state, as its refusal histogram counts them.
func refusals(t *testing.T, s *testenv.Stack, endpoint string, state gobreaker.State) float64 {
	t.Helper()
	samples, err := metricnames.Scrape(context.Background(), s.MetricsURL(), metricnames.BreakerRefusalDuration+"_count")
	require.NoError(t, err)
	for _, sm := range samples {
		if sm.Labels["endpoint"] == endpoint && sm.Labels["state"] == state.String() {
			return sm.Value
		}
	}
	return 0
}
