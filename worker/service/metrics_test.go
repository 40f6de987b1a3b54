package service_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	wm "github.com/payguard/payguard/worker/metrics"
)

// pastDeadline reads payguard_orders_past_deadline from the worker's /metrics.
func pastDeadline(t *testing.T, s *testenv.Stack) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + wm.OrdersPastDeadline + ` (\S+)$`).FindStringSubmatch(metrics(t, s))
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
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	placeOrder(t, s, "late-deadline-1", "--deadline", "3s")
	waitStatus(t, s, "late-deadline-1", status.OrderPending)
	if v := pastDeadline(t, s); v != 0 {
		t.Fatalf("before the deadline: %s = %v, want 0", wm.OrdersPastDeadline, v)
	}
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	testenv.Eventually(t, 30*time.Second, func() bool { return pastDeadline(t, s) == 1 }, "the stuck order counted")
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	waitStatus(t, s, "late-deadline-1", status.OrderCancelled)
	if v := pastDeadline(t, s); v != 0 {
		t.Fatalf("once cancelled: %s = %v, want 0", wm.OrdersPastDeadline, v)
	}
}
