package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The order's first create is answered 429 (recorded UNREACHABLE: not
// processed, nothing charged), its retry is accepted: one transaction. The
// lookup breaker then trips on a lookup outage that ends at once; the
// gateway decides FAILED and sends its signed callback. The gateway
// decided, and nothing else of the order can exist: the order ends FAILED.
// Found by review: the FAILED once waited for a search by order id after
// any second create, the open breaker refused it, and the deadline
// compensated the order — CANCELLED without an operator's cancel.
func TestASignedFailedAfterA429IsNotLost(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusTooManyRequests
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.Breaker = activities.DefaultBreakerSettings()
		c.Breaker.OpenFor = 2 * time.Minute
		c.PollInitial, c.PollMax = time.Second, 2*time.Second
	})
	ctx := context.Background()

	setStock(t, s, "P1", 5)
	const orderID = "rvw-lost-0001"
	placeOrder(t, s, orderID, "P1", 2, "--deadline", "40s")
	testenv.Eventually(t, 20*time.Second, func() bool {
		at, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(at) >= 1
	}, "the first create answered 429")
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorRate": 0}})
	o := waitOrder(t, s, orderID, status.OrderPending, 30*time.Second)

	openLookupBreaker(t, s, orderID, o.TransactionKey)

	testenv.Resolve(t, s.Sim, o.TransactionKey, "FAILED", "LIMIT_EXCEEDED", true)
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	runErr := workflowEnd(t, tc, id, 90*time.Second)
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	t.Logf("workflow ended: %v; order %s payment %s; attempts %d; anomalies %q", runErr, got.Status, got.PaymentStatus, got.Attempts,
		anomalies(t, s.Store, orderID))
	history := historySummary(t, tc, id)
	t.Logf("history:\n%s", history)
	assert.Contains(t, history, "WorkflowExecutionSignaled", "the gateway's signed callback reached the workflow")
	assert.Equal(t, status.OrderFailed, got.Status, "the gateway signed FAILED for the order's only transaction")
	assert.Equal(t, status.PaymentFailed, got.PaymentStatus)
}
