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

// A keyed create retried until its deadline: its last try made the
// transaction and was answered 500, the next try came at the deadline.
// That try reported "not sent" (CreateDeadlinePassed), so the workflow
// took the order for one nothing of which may be at the gateway: its last
// lookup came at once, inside the grace in which the gateway may not yet
// list the transaction, and the order was compensated while it charged
// (refunded later: a lost order). A create refused at its deadline after
// an earlier try of it recorded one that may have reached the gateway
// reports that one's answer, unknown, as a lapsed grant does; one whose
// tries were never let out (refused dials) is still "not sent".
func TestACreateRefusedAtItsDeadlineAfterATryThatMayHaveSentIsUnknown(t *testing.T) {
	f := quiet()
	f.Create.CreatedThen500Rate = 1
	r := newRig(t, f, activities.DefaultBreakerSettings(), true)
	r.reserve(t, "deadline-sent")
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("deadline-sent"))
	typ, retryable := appError(t, err)
	require.Equal(t, activities.ErrGatewayUnknownKeyed, typ, "%v", err)
	require.True(t, retryable)

	r.reserve(t, "deadline-unsent")
	testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
	_, err = r.env.ExecuteActivity(r.acts.RequestPayment, request("deadline-unsent"))
	typ, _ = appError(t, err)
	require.Equal(t, activities.ErrGatewayUnreachable, typ, "%v", err)

	for _, tc := range []struct{ order, want string }{
		{"deadline-sent", activities.ErrGatewayOutcomeUnknown},
		{"deadline-unsent", activities.ErrDeadlinePassed},
	} {
		in := request(tc.order)
		in.Deadline = time.Now().Add(-time.Millisecond)
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		assert.Equal(t, tc.want, appErr.Type(), "order %s: %v", tc.order, err)
		assert.True(t, appErr.NonRetryable(), "order %s", tc.order)
		var failure activities.RequestFailure
		require.NoError(t, appErr.Details(&failure))
		assert.False(t, failure.Answered, "order %s: the grace of a create whose last answer is not in hand", tc.order)
	}
	assert.Len(t, r.attempts(t, "deadline-sent"), 1, "nothing was sent at the deadline")
	assert.Len(t, r.attempts(t, "deadline-unsent"), 1, "nothing was sent at the deadline")
}
