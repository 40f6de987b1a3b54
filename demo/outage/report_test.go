package outage_test

import (
	"encoding/xml"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

func sampleRun() (loadgen.Summary, []outage.GatewayEvent, simulator.Stats) {
	sum := loadgen.Summary{Rate: 3, DurationSec: 60, Started: 3, Final: map[string]int{"CONFIRMED": 2, "CANCELLED": 1},
		BreakerChanges: []loadgen.BreakerChange{
			{Offset: 15.4, Breaker: "gateway-create", From: "closed", To: "open"},
			{Offset: 16.8, Breaker: "gateway-lookup", From: "closed", To: "open"},
			{Offset: 30.6, Breaker: "gateway-create", From: "half-open", To: "closed"},
			{Offset: 26.8, Breaker: "gateway-lookup", From: "open", To: "half-open"},
			{Offset: 26.9, Breaker: "gateway-lookup", From: "half-open", To: "open"},
			{Offset: 36.9, Breaker: "gateway-lookup", From: "open", To: "half-open"},
			{Offset: 37.2, Breaker: "gateway-lookup", From: "half-open", To: "closed"},
		},
		Orders: []loadgen.OrderSample{
			{OrderID: "a", StartOffset: 1, StartMillis: 5, FinalMillis: 1200, Final: "CONFIRMED", BreakerAtFire: "closed"},
			{OrderID: "b", StartOffset: 20, StartMillis: 3, FinalMillis: 1600, Final: "CANCELLED", BreakerAtFire: "open"},
			{OrderID: "c", StartOffset: 40, StartMillis: 7, FinalMillis: 2400, Final: "CONFIRMED", BreakerAtFire: "closed"},
		}}
	events := []outage.GatewayEvent{{Offset: 15, Down: true}, {Offset: 30, Down: false}}
	stats := simulator.Stats{Orders: map[string]simulator.OrderStats{
		"a": {CreateRequests: 1, Transactions: []string{"t1"}, Successful: 1},
		"b": {CreateRequests: 3},
		"c": {CreateRequests: 2, Transactions: []string{"t3"}, Successful: 1},
	}}
	return sum, events, stats
}

func TestBuildReportTimesTheBreakerAndChecksTheMoney(t *testing.T) {
	sum, events, stats := sampleRun()
	r := outage.BuildReport(sum, events, stats, map[string]outage.LatencyMean{"ok": {Count: 4, MeanMs: 250}})
	require.NotNil(t, r.OutageToOpen)
	assert.InDelta(t, 1.8, *r.OutageToOpen, 0.01)
	require.NotNil(t, r.RecoveryToClose)
	assert.InDelta(t, 7.2, *r.RecoveryToClose, 0.01, "the lookup breaker's CLOSED after recovery, not the create breaker's")
	require.NotNil(t, r.CreateOutageToOpen)
	assert.InDelta(t, 0.4, *r.CreateOutageToOpen, 0.01)
	require.NotNil(t, r.CreateRecoveryToClose)
	assert.InDelta(t, 0.6, *r.CreateRecoveryToClose, 0.01)
	assert.Equal(t, 3, r.MaxCreateRequestsPerOrder)
	assert.Equal(t, 1, r.MaxTransactionsPerOrder)
	assert.Zero(t, r.OrdersChargedTwice)
	assert.Equal(t, 2, r.FirstAnswerClosed.Count)
	assert.Equal(t, 1, r.FirstAnswerOpen.Count)
	assert.Equal(t, map[int]int{1: 1, 2: 1, 3: 1}, r.CreateRequestsHistogram)

	stats.Orders["a"] = simulator.OrderStats{CreateRequests: 2, Transactions: []string{"t1", "t2"}, Successful: 2}
	r = outage.BuildReport(sum, events, stats, nil)
	assert.Equal(t, 1, r.OrdersChargedTwice)
	assert.Equal(t, 2, r.MaxTransactionsPerOrder)
	text := r.Text()
	assert.Contains(t, text, "orders charged twice             1")
	assert.Contains(t, text, "outage -> OPEN")
}

func TestSVGIsWellFormedAndDrawsEveryOrder(t *testing.T) {
	sum, events, stats := sampleRun()
	svg := outage.BuildReport(sum, events, stats, nil).SVG()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err != nil {
			require.Equal(t, "EOF", err.Error(), "well-formed XML")
			break
		}
	}
	assert.Equal(t, 3+5, strings.Count(svg, "<circle"), "one dot per order plus the legend")
	assert.Contains(t, svg, "gateway down")
	assert.Equal(t, 6, strings.Count(svg, `height="40"`), "a band per breaker state")
}

// The outcomes split by when each order was placed: before the outage (T+15)
// and after it (T+30) count as up; the outage's orders are also timed from
// its end, an order final before the end counting 0.
func TestAddOutcomesSplitsByTheOutage(t *testing.T) {
	sum, events, stats := sampleRun()
	began := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	sum.BeganAt = began
	at := func(sec float64) time.Time { return began.Add(time.Duration(sec * float64(time.Second))) }
	outs := []store.Outcome{
		{OrderID: "a", Status: status.OrderConfirmed, PlacedAt: at(1), FinalAt: at(2)},
		{OrderID: "b", Status: status.OrderCancelled, Lost: store.LostCancelled, PlacedAt: at(20), FinalAt: at(50)},
		{OrderID: "d", Status: status.OrderCancelled, Lost: store.LostRefunded, PlacedAt: at(25), FinalAt: at(34)},
		{OrderID: "e", Status: status.OrderFailed, PlacedAt: at(16), FinalAt: at(29)},
		{OrderID: "c", Status: status.OrderConfirmed, PlacedAt: at(40), FinalAt: at(43)},
		{OrderID: "f", Status: status.OrderPending, PlacedAt: at(30)},
		{OrderID: "g", Status: status.OrderConfirmed, PlacedAt: at(12), FinalAt: at(35)},
		{OrderID: "h", Status: status.OrderPending, PlacedAt: at(14)},
	}
	r := outage.BuildReport(sum, events, stats, nil)
	r.AddOutcomes(outs)
	assert.Equal(t, 2, r.Outcomes.Lost)
	assert.Equal(t, map[string]int{"cancelled": 1, "refunded": 1}, r.Outcomes.LostByKind)
	assert.Equal(t, []string{"b", "d"}, r.Outcomes.LostExamples)
	assert.Equal(t, 6, r.Outcomes.Final, "f and h are not final")
	assert.Equal(t, 5, r.PlacedWhileUp.Orders, "a, g, h before the outage; c, and f placed as the gateway came back")
	assert.Zero(t, r.PlacedWhileUp.Lost)
	assert.Equal(t, 3, r.PlacedInOutage.Orders)
	assert.Equal(t, 2, r.PlacedInOutage.Lost)
	assert.Equal(t, 3, r.OutageEndToFinal.Count)
	assert.Equal(t, 0.0, r.OutageEndToFinal.Min, "e ended before the gateway came back")
	assert.Equal(t, 20000.0, r.OutageEndToFinal.Max, "b: T+30 to T+50")
	assert.Equal(t, 1000.0, r.PlacedWhileUp.FinalLatency.Min)
	assert.Equal(t, 3, r.UntouchedByOutage.Orders, "a ended before the outage, c and f placed after it")
	assert.Equal(t, 2, r.CaughtByOutage.Orders, "g and h: placed before the outage, open when it began")
	assert.Equal(t, 1, r.CaughtOutageEndToFinal.Count, "h is not final")
	assert.Equal(t, 5000.0, r.CaughtOutageEndToFinal.Max, "g: T+30 to T+35")

	text := r.Text()
	assert.Regexp(t, `lost orders +2 of 8 \(cancelled 1, refunded 1\)`, text)
	assert.Regexp(t, `placed during the outage +2 of 3 \(cancelled 1, refunded 1\)`, text)
	assert.Regexp(t, `outage end -> final status +p50 4000 ms, p95 20000 ms \(3 orders\)`, text)
	assert.Regexp(t, `not caught by the outage +p50 \d+ ms, p95 \d+ ms \(2 orders\)`, text)
	assert.Regexp(t, `caught by it, outage end -> final +p50 5000 ms, p95 5000 ms \(1 orders\)`, text)
	assert.Regexp(t, `open-breaker refusal, in the activity +none`, text)
	assert.Contains(t, r.SVG(), "2 of 8 orders lost")
}

// The refusal percentiles come from the worker's own histogram, as its
// metrics endpoint serves it: calls refused while open only, lookups by
// either endpoint together, each percentile the bound of its bucket.
func TestScrapeOpenBreakerRefusalReadsTheWorkersHistogram(t *testing.T) {
	m := service.NewMetrics()
	for range 98 {
		m.BreakerRefused("lookup-by-order", "open", 40*time.Microsecond)
	}
	m.BreakerRefused("lookup", "open", 3*time.Millisecond)
	m.BreakerRefused("create", "open", 700*time.Microsecond)
	m.BreakerRefused("lookup", "half-open", 2*time.Second) // not the open breaker's
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	all, by, err := outage.ScrapeOpenBreakerRefusal(t.Context(), srv.URL)
	require.NoError(t, err)
	require.NotNil(t, all)
	assert.Equal(t, 100, all.Count)
	assert.InDelta(t, 0.05, all.P50, 1e-9, "p50 within the first bucket, 50 us")
	assert.InDelta(t, 1, all.P99, 1e-9, "the 99th of 100 calls, the create, within 1 ms")
	assert.Equal(t, 99, by["lookup"].Count)
	assert.InDelta(t, 5, by["lookup"].P99, 1e-9, "the 3 ms lookup, within 5 ms")
	assert.Equal(t, 1, by["create"].Count)
	assert.Contains(t, outage.Report{OpenBreakerRefusal: all, OpenBreakerRefusalByEndpoint: by}.Text(), "open-breaker refusal, in the activity")
}
