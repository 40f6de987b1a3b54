package loadgen_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Every kind is listed, zero or not; latency counts the final orders only.
func TestSumOutcomesCountsLostByKind(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	outs := []store.Outcome{
		{OrderID: "a", Status: status.OrderConfirmed, PlacedAt: t0, FinalAt: t0.Add(2 * time.Second)},
		{OrderID: "b", Status: status.OrderCancelled, Lost: store.LostCancelled, PlacedAt: t0, FinalAt: t0.Add(30 * time.Second)},
		{OrderID: "c", Status: status.OrderPending, PlacedAt: t0},
	}
	o := loadgen.SumOutcomes(outs)
	assert.Equal(t, 3, o.Orders)
	assert.Equal(t, 2, o.Final)
	assert.Equal(t, map[string]int{store.LostCancelled: 1, store.LostRefunded: 0}, o.LostByKind)
	assert.Equal(t, []string{"b"}, o.LostExamples)
	assert.Equal(t, 2, o.FinalLatency.Count)
	assert.Equal(t, 30000.0, o.FinalLatency.P95)
	assert.Equal(t, "1 of 3 (cancelled 1, refunded 0)", o.LostLine())
	assert.Equal(t, "p50 2000 ms, p95 30000 ms (2 orders)", o.LatencyLine())
	assert.Equal(t, "0 of 0 (cancelled 0, refunded 0)", loadgen.SumOutcomes(nil).LostLine())
	assert.Equal(t, "no orders", loadgen.SumOutcomes(nil).LatencyLine())
}
