package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/store"
)

// A re-send whose grant lapsed is "not sent" only when nothing of that
// grant left. Here an earlier try of it recorded the create SENDING (and
// may have written it: its worker died, or its answer could not be
// recorded) before the retry found the grant lapsed: the outcome is
// unknown, so the workflow waits the full grace before a lookup that could
// grant another create beside one still on the wire.
func TestALapsedReSendThatAnEarlierTrySentIsUnknown(t *testing.T) {
	f := quiet()
	f.Create.ErrorRate = 1 // every create answered 500 in full: the first one's outcome is unknown
	r := newRig(t, f, activities.DefaultBreakerSettings(), false)
	ctx := context.Background()
	for _, id := range []string{"lapsed-sent", "lapsed-unused"} {
		r.reserve(t, id)
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request(id))
		typ, _ := appError(t, err)
		require.Equal(t, activities.ErrGatewayOutcomeUnknown, typ)
	}

	// The earlier try of resend-1: recorded SENDING, never answered.
	begun, err := r.store.BeginAttempt(ctx, store.AttemptRequest{OrderID: "lapsed-sent", Grant: "resend-1",
		GrantExpires: time.Now().Add(time.Minute), CallbackURL: "http://127.0.0.1:1/callbacks/gateway"})
	require.NoError(t, err)
	require.True(t, begun.Send)

	for _, tc := range []struct {
		order, want string
		answered    bool
	}{
		{"lapsed-sent", activities.ErrGatewayOutcomeUnknown, false},
		{"lapsed-unused", activities.ErrGrantExpired, false},
	} {
		in := request(tc.order)
		in.Grant, in.GrantExpires = "resend-1", time.Now().Add(-time.Second)
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
		typ, _ := appError(t, err)
		assert.Equal(t, tc.want, typ, "order %s", tc.order)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		var failure activities.RequestFailure
		require.NoError(t, appErr.Details(&failure))
		assert.Equal(t, tc.answered, failure.Answered, "a create that may be on the wire was not answered in full")
	}
	assert.Len(t, r.attempts(t, "lapsed-sent"), 2, "nothing more was sent")
	assert.Len(t, r.attempts(t, "lapsed-unused"), 1, "nothing of the lapsed grant was sent")
}

// A recovery reads a refused re-send after an unknown create as a refusal
// that may still be overturned: MaybeSent (search first) and Rejected
// (then fail the order), where the payment stays UNKNOWN in the store.
func TestRecoveryReadsARefusalAfterAnUnknownCreate(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	ctx := context.Background()
	r.reSentAfterUnknown(t, store.Answer{OrderID: "refused-resend", Outcome: store.OutcomeRejected, Reason: "LIMIT_EXCEEDED"})

	sw := activities.NewSweeper(r.store, r.acts, nil, 10, nil)
	got, err := sw.ReadRecoveryOrder(ctx, "refused-resend")
	require.NoError(t, err)
	assert.True(t, got.MaybeSent, "the first create's outcome is unknown: search before anything else")
	assert.Equal(t, "LIMIT_EXCEEDED", got.Rejected, "the latest create was refused")
}

// The recovery of an order whose workflow is gone after an accepted
// re-send reads the re-send (Resends): it holds a FAILED for the re-send's
// transaction for a search by order id, as PaymentWorkflow does (workflows
// TestARecoveryAfterAnAcceptedReSendSearchesBeforeFailing).
func TestRecoveryReadsAnAcceptedReSend(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	ctx := context.Background()
	r.reSentAfterUnknown(t, store.Answer{OrderID: "accepted-resend", Outcome: store.OutcomeAccepted, TransactionKey: "20261130:TR:0000t2"})

	sw := activities.NewSweeper(r.store, r.acts, nil, 10, nil)
	got, err := sw.ReadRecoveryOrder(ctx, "accepted-resend")
	require.NoError(t, err)
	assert.Equal(t, 1, got.Resends, "the second create was re-sent under a grant")
	assert.Equal(t, []string{"20261130:TR:0000t2"}, got.Keys)

	// Reserve again (an operator's reset to the first task) reads it too
	// (workflows TestARunAgainAfterAnAcceptedReSendSearchesBeforeFailing).
	v, err := r.env.ExecuteActivity(r.acts.Reserve, activities.ReserveInput{OrderID: "accepted-resend", ProductID: "P1", Quantity: 2, Amount: 5000, UserID: "u1"})
	require.NoError(t, err)
	var held activities.ReserveResult
	require.NoError(t, v.Get(&held))
	assert.Equal(t, 1, held.Resends, "the run again holds a FAILED after the re-send for a search")
}

// reSentAfterUnknown reserves the answer's order and records its first
// create UNKNOWN, then a re-send under a grant answered as given (the
// answer's attempt number filled in).
func (r *rig) reSentAfterUnknown(t *testing.T, again store.Answer) {
	t.Helper()
	ctx := context.Background()
	r.reserve(t, again.OrderID)
	first, err := r.store.BeginAttempt(ctx, store.AttemptRequest{OrderID: again.OrderID})
	require.NoError(t, err)
	require.NoError(t, r.store.FinishAttempt(ctx, store.Answer{OrderID: again.OrderID, No: first.Attempt.No, Outcome: store.OutcomeUnknown}))
	resend, err := r.store.BeginAttempt(ctx, store.AttemptRequest{OrderID: again.OrderID, Grant: "resend-1", GrantExpires: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, resend.Send)
	again.No = resend.Attempt.No
	require.NoError(t, r.store.FinishAttempt(ctx, again))
}
