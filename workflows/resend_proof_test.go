package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// A re-send's local try that ends retryably after its create left (its
// answer could not be recorded, or it timed out) goes on as a regular
// activity, which finds the grant lapsed. The activity reports that
// create unknown and unanswered (activities
// TestALapsedReSendThatAnEarlierTrySentIsUnknown), so the lookup that may
// grant the next re-send waits the full --unknown-grace: a create on the
// wire is never re-sent beside after the short answered grace.
func TestALapsedReSendAfterALocalTryThatMayHaveSentWaitsTheFullGrace(t *testing.T) {
	r := newRun(t)
	var at []time.Duration
	stamp := func(f func() (activities.RequestResult, error)) func() (activities.RequestResult, error) {
		return func() (activities.RequestResult, error) {
			at = append(at, r.env.Now().Sub(r.start))
			return f()
		}
	}
	// The re-send's create was written, its answer then could not be
	// recorded (the database away): RequestPayment returns storeError(err),
	// a plain retryable error, after recordWithin.
	sentThenRecordFailed := func() (activities.RequestResult, error) {
		return activities.RequestResult{}, errors.New("record answer: failed to connect to `host=127.0.0.1`: connection refused")
	}
	// The regular try: the grant lapsed, and the create it let out never
	// came back with its answer.
	lapsed := func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("unanswered", activities.ErrGatewayOutcomeUnknown,
			errors.New("re-send resend-1 was sent by an earlier try that never came back with its answer"), activities.RequestFailure{Attempt: 1, Attempts: 2})
	}
	r.requestReturns(stamp(answered500(1)), stamp(sentThenRecordFailed), stamp(lapsed), stamp(accepted(3)))
	r.lookupReturns(nothingFound, nothingFound, nothingFound, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	t.Logf("creates at %v, grants %q", at, grants(r))
	require.GreaterOrEqual(t, len(at), 4)
	// at[1] is the local try whose create may still be on the wire; at[2]
	// the regular try that found its grant lapsed, after at[1] ended with
	// #2 still SENDING (never answered, never closed); at[3] the next
	// create the gateway may see, under a new grant, sent right after the
	// lookup that justified it. That lookup must come the full
	// --unknown-grace after the workflow learned the try ended unanswered,
	// as it does after a read timeout (TestTimedOutCreateWaitsTheFullGrace);
	gap := at[3] - at[2]
	assert.GreaterOrEqual(t, gap, workflows.DefaultTuning().UnknownGrace,
		"re-sent %s after a try whose create may still be in flight (grant %q), without the full --unknown-grace", gap, r.sent[3].Grant)
	assert.Equal(t, status.OrderConfirmed, st.Status)
}

func grants(r *run) []string {
	var g []string
	for _, in := range r.sent {
		g = append(g, in.Grant)
	}
	return g
}

// After an answered 500 whose transaction T1 the
// lookup did not yet list (design.md §1's residual: created after the
// lookup), the re-send is refused 4xx by the gateway (REJECTED). decide()
// holds any FAILED after a re-send until a lookup by order id has listed
// the order's transactions ("the first may have made a transaction no
// answer named", §2 step 3) — but resend() sets p.outcome FAILED straight
// from the create's refusal, with no search: the order ends FAILED, the
// stock released, and T1's SUCCESS, approved within the deadline, is
// refunded as a late charge — a lost order. The refusal is held and
// searched like a FAILED callback.
func TestARefusedReSendIsSearchedBeforeTheOrderFails(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	// The proof's lookup sees nothing; any later search finds T1 charged.
	r.lookupReturns(nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	var searchesAfterReject int
	for _, in := range r.lookups[1:] {
		if in.TransactionKey == "" {
			searchesAfterReject++
		}
	}
	assert.NotZero(t, searchesAfterReject, "a FAILED after a re-send is settled only after a search by order id")
	assert.Equal(t, status.OrderConfirmed, st.Status, "T1 was approved by the gateway within the deadline: lost order")
}

// A refused re-send with no transaction of the order at the gateway is
// the answer: the order fails at once, after that one search.
func TestARefusedReSendWithNothingFoundFails(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	r.lookupReturns(nothingFound, nothingFound)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentFailed, st.PaymentStatus)
	assert.Equal(t, "LIMIT_EXCEEDED", st.Reason)
	assert.Len(t, r.sent, 2, "nothing is sent after the refusal")
	assert.Len(t, r.lookups, 2, "the proof's lookup and the one search")
	assert.Less(t, r.env.Now().Sub(r.start), workflows.DefaultTuning().UnknownGrace, "failed by the search, not the deadline")
}
