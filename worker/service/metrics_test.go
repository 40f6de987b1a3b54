package service_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/buildinfo"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli/clitest"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	wm "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
)

// pastDeadline reads payguard_orders_past_deadline from the worker's /metrics.
func pastDeadline(t *testing.T, s *testenv.Stack) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + wm.OrdersPastDeadline + ` (\S+)$`).FindStringSubmatch(s.Metrics(t))
	if m == nil {
		t.Fatalf("%s not in /metrics", wm.OrdersPastDeadline)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// An order whose compensation cannot finish (the gateway is down, so its
// cancel is never acknowledged) stays PENDING past its deadline: the gauge
// counts it while it does, and not before or after.
func TestOrdersStuckPastTheirDeadlineAreCounted(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	s.SetStock(t, "P1", 5)
	clitest.PlaceOrder(t, s, "late-deadline-1", "P1", 2, "--deadline", "3s")
	s.WaitOrder(t, "late-deadline-1", status.OrderPending, 30*time.Second)
	if v := pastDeadline(t, s); v != 0 {
		t.Fatalf("before the deadline: %s = %v, want 0", wm.OrdersPastDeadline, v)
	}
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	testenv.Eventually(t, 30*time.Second, func() bool { return pastDeadline(t, s) == 1 }, "the stuck order counted")
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	s.WaitOrder(t, "late-deadline-1", status.OrderCancelled, 30*time.Second)
	if v := pastDeadline(t, s); v != 0 {
		t.Fatalf("once cancelled: %s = %v, want 0", wm.OrdersPastDeadline, v)
	}
}

// The lookup breaker's state and transitions, the gateway calls' outcomes
// and the SDK's own metrics on /metrics, through an outage; an open breaker
// fails no payment.
func TestMetricsShowTheBreakerOpeningWhenTheGatewayIsDown(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = 200*time.Millisecond, 200*time.Millisecond })
	s.SetStock(t, "P1", 10)
	for i := range 3 {
		clitest.PlaceOrder(t, s, fmt.Sprintf("brk-%04d", i), "P1", 1)
	}
	for i := range 3 {
		s.WaitOrder(t, fmt.Sprintf("brk-%04d", i), status.OrderPending, 30*time.Second)
	}
	assert.Contains(t, s.Metrics(t), `payguard_breaker_state{breaker="gateway-lookup"} 0`)
	assert.Contains(t, s.Metrics(t), `payguard_breaker_current_state{breaker="gateway-lookup",state="closed"} 1`)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(s.Metrics(t), `payguard_breaker_state{breaker="gateway-lookup"} 2`)
	}, "breaker open in /metrics")
	m := s.Metrics(t)
	// The labelled form says the same, as long as nothing moved between.
	if strings.Contains(m, `payguard_breaker_state{breaker="gateway-lookup"} 2`) {
		assert.Contains(t, m, `payguard_breaker_current_state{breaker="gateway-lookup",state="open"} 1`)
		assert.Contains(t, m, `payguard_breaker_current_state{breaker="gateway-lookup",state="closed"} 0`)
	}
	assert.Contains(t, m, `payguard_breaker_transitions_total{breaker="gateway-lookup",from="closed",to="open"} 1`)
	assert.Contains(t, m, `payguard_gateway_calls_total{endpoint="lookup",outcome="unreachable"}`)
	// The SDK's own metrics, through its OpenTelemetry contrib: counters
	// as Prometheus counters, timers as histograms in seconds.
	assert.Regexp(t, `(?m)^# TYPE temporal_request_total counter$`, m)
	assert.Regexp(t, `(?m)^temporal_request_latency_seconds_bucket\{.*le="0.005"`, m)
	for i := range 3 {
		o, err := s.Store.GetOrder(context.Background(), fmt.Sprintf("brk-%04d", i))
		require.NoError(t, err)
		assert.Equal(t, status.OrderPending, o.Status, "an open breaker fails no payment")
	}
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(s.Metrics(t), `payguard_breaker_transitions_total{breaker="gateway-lookup",from="half-open",to="closed"} 1`)
	}, "breaker closed again")
}

// sampleValue is the value of the series name{labels} on the worker's
// /metrics, or false when it is not there.
func sampleValue(t *testing.T, s *testenv.Stack, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	samples, err := wm.Scrape(context.Background(), s.MetricsURL(), name)
	require.NoError(t, err)
next:
	for _, sm := range samples {
		for k, v := range labels {
			if sm.Labels[k] != v {
				continue next
			}
		}
		return sm.Value, true
	}
	return 0, false
}

// Orders are counted once at their final status, lost ones by kind, on a
// real worker: one confirmed by its callback, one cancelled at its
// deadline (lost), one rejected for stock; the build and both breakers'
// states are there from the start.
func TestMetricsCountOrdersAtTheirFinalStatusAndLostOnes(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	s.SetStock(t, "P1", 3)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := sampleValue(t, s, name, labels)
		require.True(t, ok, "%s%v not on /metrics", name, labels)
		return v
	}
	for _, st := range status.FinalOrders {
		assert.Zero(t, value(wm.Orders, map[string]string{"status": string(st)}), "every status from the start, at 0")
	}
	for _, kind := range store.LostKinds {
		assert.Zero(t, value(wm.LostOrders, map[string]string{"kind": kind}))
	}
	bi := buildinfo.Read()
	assert.Equal(t, 1.0, value(wm.BuildInfo, map[string]string{"version": bi.Version, "go": runtime.Version()}))
	for _, b := range []string{"gateway-lookup", "gateway-create"} {
		assert.Equal(t, 1.0, value(wm.BreakerCurrentState, map[string]string{"breaker": b, "state": "closed"}), b)
		assert.Zero(t, value(wm.BreakerCurrentState, map[string]string{"breaker": b, "state": "open"}), b)
		assert.Zero(t, value(wm.BreakerCurrentState, map[string]string{"breaker": b, "state": "half-open"}), b)
	}

	clitest.PlaceOrder(t, s, "counted-ok", "P1", 1)
	o := s.WaitOrder(t, "counted-ok", status.OrderPending, 30*time.Second)
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", true)
	s.WaitOrder(t, "counted-ok", status.OrderConfirmed, 30*time.Second)
	clitest.PlaceOrder(t, s, "counted-late", "P1", 1, "--deadline", "2s")
	s.WaitOrder(t, "counted-late", status.OrderCancelled, 30*time.Second)
	clitest.PlaceOrder(t, s, "counted-rejected", "P1", 5)
	s.WaitOrder(t, "counted-rejected", status.OrderRejected, 30*time.Second)

	want := map[status.Order]float64{status.OrderConfirmed: 1, status.OrderCancelled: 1, status.OrderRejected: 1, status.OrderFailed: 0}
	for st, n := range want {
		assert.Equal(t, n, value(wm.Orders, map[string]string{"status": string(st)}), st)
	}
	assert.Equal(t, 1.0, value(wm.LostOrders, map[string]string{"kind": store.LostCancelled}))
	assert.Zero(t, value(wm.LostOrders, map[string]string{"kind": store.LostRefunded}))
	// The report's definition says the same of the same orders.
	outs, err := s.Store.Outcomes(context.Background(), []string{"counted-ok", "counted-late", "counted-rejected"})
	require.NoError(t, err)
	lost := 0
	for _, out := range outs {
		if out.Lost != "" {
			lost++
		}
	}
	assert.Equal(t, 1, lost)
}

// Runs pinned to a build whose workers have stopped are counted by the
// workers left: an order pinned to build old waits while only build new
// polls, and new's /metrics says so, beside its own build.
func TestMetricsCountRunsPinnedToAStoppedBuild(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) {
		c.BuildID, c.PollInitial, c.PollMax = "old", time.Minute, time.Minute
	})
	s.SetStock(t, "P1", 5)
	clitest.PlaceOrder(t, s, "pinned-0001", "P1", 1)
	s.WaitOrder(t, "pinned-0001", status.OrderPending, 30*time.Second)
	next := s.StartWorker(t, func(c *service.Config) { c.BuildID, c.SetCurrent = "new", deployment.SetCurrentAlways })
	require.NoError(t, s.Worker.Stop())

	url := "http://" + next.Addr() + "/metrics"
	dep := s.Config.DeploymentName
	var seen []wm.Sample
	testenv.Eventually(t, 60*time.Second, func() bool {
		var err error
		seen, err = wm.Scrape(context.Background(), url, wm.PinnedRunsOpen, wm.WorkerBuild)
		require.NoError(t, err)
		pinned := map[string]float64{}
		var builds []string
		for _, sm := range seen {
			assert.Equal(t, dep, sm.Labels["deployment"])
			if sm.Name == wm.PinnedRunsOpen {
				pinned[sm.Labels["build_id"]] = sm.Value
			} else {
				builds = append(builds, sm.Labels["build_id"])
			}
		}
		return pinned["old"] == 1 && pinned["new"] == 0 && slices.Equal(builds, []string{"new"})
	}, "the order pinned to old counted on new's /metrics")
}
