package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
)

// A keyed retry's backoff counts the creates that may have reached the
// gateway (design §1), not every row of payment_attempts: an order that met
// three refused dials (UNREACHABLE) during an outage starts its keyed retries
// of a 500 at the schedule's first step, not 4 s in (and at the 10 s cap after
// two more), the pace that lost an order in the demo before 96b9dc8.
func TestKeyedRetriesAreNotPacedByConnectErrors(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
	for range 3 {
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrGatewayUnreachable, appErr.Type(), "%v", err)
	}
	testenv.PatchFaults(t, r.sim, map[string]any{"down": false, "create": map[string]any{"errorRate": 1}})
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrGatewayUnknownKeyed, appErr.Type(), "%v", err)
	assert.Equal(t, 500*time.Millisecond, appErr.NextRetryDelay(), "the first create the gateway saw: the schedule's first step")
}
