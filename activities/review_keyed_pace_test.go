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

// Review of 96b9dc8: the keyed retry's backoff is meant to count "the
// creates the gateway was sent" (design §1, so that an outage does not
// start it at the cap), but it counts every row of payment_attempts,
// connect errors (UNREACHABLE: never reached the gateway) included. An
// order that met three refused dials during an outage gets its first keyed
// retry of a 500 4 s later, and the cap (10 s) after two more: the pace
// that lost an order in the demo before 96b9dc8, by another road.
func TestReviewKeyedRetriesAreNotPacedByConnectErrors(t *testing.T) {
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
