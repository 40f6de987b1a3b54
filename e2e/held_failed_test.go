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
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// The order's first create is answered 500 (no transaction made), the
// lookup finds nothing and the re-send is accepted. The lookup breaker then
// opens, and the gateway's signed FAILED arrives: after a re-send it is held
// for a search by order id, which the open breaker refuses. The search must
// come when the breaker lets lookups through again, not on the regular poll
// backoff: found in the demo, an order so held waited 46 s for the deadline
// with the gateway back, because the poll timer set before the callback
// stood.
func TestAHeldFailedIsSearchedWhenTheBreakerAllows(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusInternalServerError
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.Breaker = activities.DefaultBreakerSettings()
		c.Breaker.OpenFor = 3 * time.Second
		// Regular polls only at the deadline: every poll the order makes
		// before it is one the re-send or the breaker asked for.
		c.PollInitial, c.PollMax = 5*time.Minute, 5*time.Minute
	})
	ctx := context.Background()

	setStock(t, s, "P1", 5)
	const orderID = "held-failed-0001"
	const deadline = 90 * time.Second
	placeOrder(t, s, orderID, "P1", 1, "--deadline", deadline.String())
	placed := time.Now()
	testenv.Eventually(t, 20*time.Second, func() bool {
		at, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(at) >= 1
	}, "the first create answered 500")
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorRate": 0}})
	var o store.Order
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		o, err = s.Store.GetOrder(ctx, orderID)
		return err == nil && o.TransactionKey != ""
	}, "the re-send accepted")
	require.Equal(t, status.OrderPending, o.Status)

	openLookupBreaker(t, s, orderID, o.TransactionKey)
	testenv.Resolve(t, s.Sim, o.TransactionKey, "FAILED", "LIMIT_EXCEEDED", true)

	// Well before the deadline: the breaker's 3 s, a trial, and the settle.
	within := deadline - time.Since(placed) - 30*time.Second
	got := waitOrder(t, s, orderID, status.OrderFailed, within)
	assert.Equal(t, status.PaymentFailed, got.PaymentStatus, "the gateway signed FAILED for the order's only transaction")
	assert.Empty(t, anomalies(t, s.Store, orderID), "nothing contradicted the answer")
}
