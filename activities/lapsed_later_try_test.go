package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/store"
)

// A grant lets more than one create out when the
// first is UNREACHABLE (unresolved() clears at the grant; an UNREACHABLE
// is not UNKNOWN, so mayResend sends again under the same grant). Try 1 of
// resend-1: dial refused, recorded UNREACHABLE. Try 2: sent, SENDING, its
// worker dies (or it times out). Try 3 finds the grant lapsed: refusedAt
// reads only the FIRST attempt of the grant (IndexFunc), the UNREACHABLE
// one, and answers "not sent" — so the workflow re-sends after the short
// answered grace beside try 2's create, possibly still on the wire.
func TestALapsedReSendWhoseLaterTrySentIsUnknown(t *testing.T) {
	f := quiet()
	f.Create.ErrorRate = 1
	r := newRig(t, f, activities.DefaultBreakerSettings(), false)
	ctx := context.Background()
	id := "lapsed-second-try"
	r.reserve(t, id)
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request(id))
	typ, _ := appError(t, err)
	require.Equal(t, activities.ErrGatewayOutcomeUnknown, typ)

	grant := store.AttemptRequest{OrderID: id, Grant: "resend-1", GrantExpires: time.Now().Add(time.Minute),
		CallbackURL: "http://127.0.0.1:1/callbacks/gateway"}
	try1, err := r.store.BeginAttempt(ctx, grant)
	require.NoError(t, err)
	require.True(t, try1.Send)
	require.NoError(t, r.store.FinishAttempt(ctx, store.Answer{OrderID: id, No: try1.Attempt.No, Outcome: store.OutcomeUnreachable,
		Detail: "dial refused"}))
	try2, err := r.store.BeginAttempt(ctx, grant)
	require.NoError(t, err)
	require.True(t, try2.Send, "the grant lets a second create out after an UNREACHABLE one")
	// try2 is sent and never answered.

	in := request(id)
	in.Grant, in.GrantExpires = "resend-1", time.Now().Add(-time.Second)
	_, err = r.env.ExecuteActivity(r.acts.RequestPayment, in)
	typ, _ = appError(t, err)
	assert.Equal(t, activities.ErrGatewayOutcomeUnknown, typ,
		"create #%d of grant resend-1 was sent and never answered, yet the lapsed try reports it not sent", try2.Attempt.No)
}
