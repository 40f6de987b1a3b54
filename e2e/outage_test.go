package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// A gateway outage under load: orders keep coming while the gateway goes
// down and comes back; the breaker goes CLOSED → OPEN → HALF_OPEN →
// CLOSED; no order fails to start, every order ends, none is charged twice,
// and the stock adds up.
//
// Not parallel: its breaker timings need the test binary's share of the
// machine to itself (other packages' binaries still run beside it).
func TestGatewayOutageLifecycle(t *testing.T) {
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(20 * time.Millisecond), Max: simulator.Duration(80 * time.Millisecond)}
	f.Create.ErrorRate = 0.2
	f.Processing = simulator.Processing{Min: simulator.Duration(200 * time.Millisecond), Max: simulator.Duration(time.Second), SuccessRate: 0.7}
	f.Callback.DropRate = 0.5 // half the answers must come from polling: lookups keep coming
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.PollInitial, c.PollMax = 300*time.Millisecond, time.Second
		c.Breaker = activities.BreakerSettings{Window: 3 * time.Second, MinCalls: 3, FailureRate: 0.5, OpenFor: 2 * time.Second, HalfOpenCalls: 3}
	})
	products := []string{"A1", "A2"}
	for _, p := range products {
		setStock(t, s, p, 1000)
	}
	scenario := outage.Scenario{
		// 6 orders/s and a 6 s outage: enough pending orders to trip the
		// breaker, within what a worker under the race detector sustains while
		// other test binaries share the machine's two cores.
		Load: loadgen.Config{Rate: 6, Duration: 12 * time.Second, Products: products, TaskQueue: s.TaskQueue,
			Order:       loadgen.Order{Qty: 1, Amount: 5000, User: "u", CardType: "KB", CardNo: "1234-5678-9012-3456", Deadline: 20 * time.Second},
			WaitTimeout: 90 * time.Second},
		DownAt: 3 * time.Second, UpAt: 9 * time.Second, AdminURL: s.Sim.AdminURL(), MetricsURL: s.MetricsURL(),
		Say: t.Logf,
	}
	sum, events, stats, err := scenario.Run(context.Background(), testenv.Temporal(t), nil)
	require.NoError(t, err)
	lookups, err := outage.ScrapeLookupLatency(context.Background(), s.MetricsURL())
	require.NoError(t, err)
	report := outage.BuildReport(sum, events, stats, lookups)
	t.Log(report.Text())

	tr := transitions(t, s)
	assert.GreaterOrEqual(t, tr["closed|open"], 1.0, "CLOSED -> OPEN")
	assert.GreaterOrEqual(t, tr["open|half-open"], 1.0, "OPEN -> HALF_OPEN")
	assert.GreaterOrEqual(t, tr["half-open|closed"], 1.0, "HALF_OPEN -> CLOSED")
	m := metrics(t, s)
	assert.Contains(t, m, `payguard_gateway_calls_total{endpoint="create",outcome="unreachable"}`, "creates refused during the outage")
	assert.Regexp(t, `payguard_gateway_calls_total\{endpoint="lookup(-by-order)?",outcome="breaker_open"\}`, m, "lookups refused by the open breaker")

	assert.Equal(t, 72, sum.Started+sum.FailedToStart)
	assert.Zero(t, sum.FailedToStart, "no order failed to start")
	finals := 0
	for st, n := range sum.Final {
		assert.Contains(t, []string{"CONFIRMED", "FAILED", "CANCELLED", "REJECTED"}, st, "every order ends in a final status")
		finals += n
	}
	assert.Equal(t, sum.Started, finals)
	assert.Zero(t, report.OrdersChargedTwice, "no order charged twice")
	assert.LessOrEqual(t, report.MaxTransactionsPerOrder, 1, "never a second create that reached the gateway")

	// Stock: conserved, nothing left reserved, sold = confirmed.
	var sold int64
	for _, p := range products {
		st := stockOf(t, s, p)
		assert.Equal(t, st.Total, st.Available+st.Reserved+st.Sold)
		assert.Zero(t, st.Reserved, "no stock left held")
		sold += st.Sold
	}
	assert.Equal(t, int64(sum.Final["CONFIRMED"]), sold)
	// The gateway's books agree: each CONFIRMED order has exactly one SUCCESS.
	confirmed := 0
	for _, o := range sum.Orders {
		if o.FinalError != "" {
			t.Logf("order %s: %s", o.OrderID, o.FinalError)
		}
		if o.Final == "CONFIRMED" {
			confirmed++
			assert.Equal(t, 1, stats.Orders[o.OrderID].Successful, o.OrderID)
		} else {
			assert.Zero(t, stats.Orders[o.OrderID].Successful, "%s is %s but charged", o.OrderID, o.Final)
		}
	}
	assert.Equal(t, sum.Final["CONFIRMED"], confirmed)
}

// A gateway that holds every answer costs an order one read timeout, not
// the gateway's 30 s; and while the lookup breaker is open, lookups fail
// fast.
func TestHangingGatewayCostsTheReadTimeoutThenFailsFast(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Create.TimeoutRate, f.Create.TimeoutDelay = 1, simulator.Duration(30*time.Second)
	f.Lookup.TimeoutRate, f.Lookup.TimeoutDelay = 1, simulator.Duration(30*time.Second)
	readTimeout := 2 * time.Second
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.ReadTimeout = readTimeout
		c.PollInitial, c.PollMax = 200*time.Millisecond, 200*time.Millisecond
		c.Breaker = activities.BreakerSettings{Window: 30 * time.Second, MinCalls: 2, FailureRate: 0.5, OpenFor: time.Minute, HalfOpenCalls: 3}
	})
	setStock(t, s, "P1", 5)
	start := time.Now()
	placeOrder(t, s, "hang-0001", "P1", 1)
	waitOrder(t, s, "hang-0001", status.OrderPending, 30*time.Second)
	attempts, err := s.Store.Attempts(context.Background(), "hang-0001")
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.NotNil(t, attempts[0].AnsweredAt)
	took := attempts[0].AnsweredAt.Sub(attempts[0].SentAt)
	t.Logf("create with a hanging gateway returned after %s (read timeout %s)", took.Round(time.Millisecond), readTimeout)
	assert.Equal(t, store.OutcomeUnknown, attempts[0].Outcome, "a read timeout is an unknown outcome")
	assert.GreaterOrEqual(t, took, readTimeout)
	assert.Less(t, took, readTimeout+3*time.Second, "the read timeout, not the gateway's 30 s")
	assert.Less(t, time.Since(start), 20*time.Second)

	testenv.Eventually(t, 30*time.Second, func() bool { return transitions(t, s)["closed|open"] >= 1 }, "breaker open after hanging lookups")
	testenv.Eventually(t, 10*time.Second, func() bool {
		l, err := outage.ScrapeLookupLatency(context.Background(), s.MetricsURL())
		return err == nil && l["breaker_open"].Count >= 3
	}, "lookups refused by the open breaker")
	l, err := outage.ScrapeLookupLatency(context.Background(), s.MetricsURL())
	require.NoError(t, err)
	t.Logf("lookup latency: hanging gateway mean %.1f ms (%d), open breaker mean %.3f ms (%d)",
		l["unknown"].MeanMs, l["unknown"].Count, l["breaker_open"].MeanMs, l["breaker_open"].Count)
	o, err := s.Store.GetOrder(context.Background(), "hang-0001")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status, "still waiting: lookup unavailable is not payment failed")
	assert.Equal(t, 1, s.Sim.Stats().Orders["hang-0001"].CreateRequests, "no blind re-send")
}
