package workflows_test

import (
	"errors"
	"fmt"
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

// Re-sends by proof, as often as the deadline allows (docs/design.md §1).

// answered500 is a create the gateway answered 500 in full: nothing of it
// in flight.
func answered500(attempts int) func() (activities.RequestResult, error) {
	return func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("500", activities.ErrGatewayOutcomeUnknown,
			errors.New("500"), activities.RequestFailure{Attempt: 1, Attempts: attempts, Answered: true})
	}
}

// Five answered 500s: each is followed, after the short grace
// (--answered-grace, twice that after a re-send), by a lookup that finds
// nothing and a re-send under a fresh grant that lapses with that lookup.
// The sixth create is accepted and the order confirmed — no fixed count.
func TestAnswered500sAreResentUntilAccepted(t *testing.T) {
	r := newRun(t)
	answers := []func() (activities.RequestResult, error){}
	for i := 1; i <= 5; i++ {
		answers = append(answers, answered500(i))
	}
	answers = append(answers, accepted(6))
	r.requestReturns(answers...)
	r.lookupReturns(nothingFound, nothingFound, nothingFound, nothingFound, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Equal(t, 6, r.requests)
	for i, in := range r.sent[1:] {
		assert.Equal(t, fmt.Sprintf("resend-%d", i+1), in.Grant)
		assert.Empty(t, r.lookups[i].TransactionKey, "the proof is a lookup by order id")
		assert.False(t, in.GrantExpires.IsZero(), "a grant lapses")
		assert.Equal(t, st.Deadline, in.Deadline, "the create is told the order's deadline")
	}
	assert.Zero(t, r.sent[0].Limit, "no fixed count: the deadline bounds the creates")
}

// The proof waits out the grace: after an answered 500 the first lookup
// comes after --answered-grace, sooner than the first regular poll.
func TestAnswered500IsLookedUpAfterTheShortGrace(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2))
	var at []time.Duration
	r.lookupReturns(func(activities.LookupInput) (activities.LookupResult, error) {
		at = append(at, r.env.Now().Sub(r.start))
		return nothingFound(activities.LookupInput{})
	}, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.NotEmpty(t, at)
	tuning := workflows.DefaultTuning()
	assert.Equal(t, tuning.AnsweredGrace, at[0].Round(time.Second), "looked up after the short grace")
	assert.Less(t, tuning.AnsweredGrace, tuning.PollInitial)
}

// A create that timed out may still be in flight: the full --unknown-grace
// passes before a lookup may justify a re-send.
func TestTimedOutCreateWaitsTheFullGrace(t *testing.T) {
	r := newRun(t)
	var resentAt time.Duration
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""), func() (activities.RequestResult, error) {
		resentAt = r.env.Now().Sub(r.start)
		return accepted(2)()
	})
	r.lookupReturns(nothingFound, nothingFound, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Equal(t, 2, r.requests)
	assert.GreaterOrEqual(t, resentAt, workflows.DefaultTuning().UnknownGrace, "re-sent only after the full grace")
}

// A re-send held back past its grant (the request breaker open) is not
// sent: the order is looked up again, and a new grant authorises the next.
func TestLapsedGrantIsLookedUpAgain(t *testing.T) {
	r := newRun(t)
	lapsed := func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("lapsed", activities.ErrGrantExpired,
			errors.New("lapsed"), activities.RequestFailure{Attempt: 1, Attempts: 1})
	}
	r.requestReturns(answered500(1), lapsed, accepted(2))
	r.lookupReturns(nothingFound, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Equal(t, 3, r.requests)
	assert.Equal(t, "resend-1", r.sent[1].Grant)
	assert.Equal(t, "resend-2", r.sent[2].Grant, "a fresh grant on a fresh lookup")
	assert.True(t, r.sent[2].GrantExpires.After(r.sent[1].GrantExpires))
}

// A first create the database refuses because the deadline passed (it was
// held back all along) never left: the order is compensated, nothing to
// search for, the stock released.
func TestCreateRefusedAtTheDeadlineCompensates(t *testing.T) {
	r := newRun(t)
	r.requestReturns(func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("deadline", activities.ErrDeadlinePassed,
			errors.New("deadline"), activities.RequestFailure{Attempt: 1})
	})
	r.lookupReturns(nothingFound)
	st := r.executeClean(t)
	assert.Equal(t, status.OrderCancelled, st.Status)
	require.Len(t, r.orderEnd, 1)
	assert.True(t, r.orderEnd[0].Unsearched, "nothing may have reached the gateway")
}

// While the gateway cannot be looked up (every lookup fails), the order
// keeps looking at the re-send's pace, not the regular backoff: the first
// lookup that answers after the outage justifies the re-send at once.
func TestLookupsAfterA500KeepTheResendPace(t *testing.T) {
	r := newRun(t)
	var resentAt time.Duration
	r.requestReturns(answered500(1), func() (activities.RequestResult, error) {
		resentAt = r.env.Now().Sub(r.start)
		return accepted(2)()
	})
	unreachable := func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{}, temporal.NewApplicationError("gateway unreachable", activities.ErrLookupFailed)
	}
	var answers []func(activities.LookupInput) (activities.LookupResult, error)
	for range 12 { // four polls of three tries each
		answers = append(answers, unreachable)
	}
	r.lookupReturns(append(answers, nothingFound, found(gateway.StatusSuccess))...)
	st := r.execute(t)
	requireConfirmed(t, r, st)
	tuning := workflows.DefaultTuning()
	regular := tuning.PollInitial * (1 + 2 + 4 + 8) // the fifth poll on the regular backoff
	assert.Less(t, resentAt, regular, "re-sent on the first lookup that answered, not on the regular backoff")
}

// A grant lapses grantLife (5 s) after its lookup was asked, not after the
// answer was read: a lookup retried for three seconds (two unreachable
// tries, then nothing found) does not stretch the re-send's grant.
func TestGrantLapsesWithTheLookupAsAsked(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2))
	var asked []time.Time
	unreachable := func(activities.LookupInput) (activities.LookupResult, error) {
		asked = append(asked, r.env.Now())
		return activities.LookupResult{}, temporal.NewApplicationError("gateway unreachable", activities.ErrLookupFailed)
	}
	r.lookupReturns(unreachable, unreachable, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Len(t, r.sent, 2)
	require.NotEmpty(t, asked)
	assert.WithinDuration(t, asked[0].Add(5*time.Second), r.sent[1].GrantExpires, 0, "the grant counts from the lookup's first try")
}

// The pace of re-sends by proof: the first lookup after --answered-grace,
// each later one twice that after its re-send's 500 — a backoff that stays
// at two graces, so a long run of 500s still reaches the gateway's decision
// in seconds, one order's creates never closer than two graces.
func TestResendsByProofKeepTwoGracesApart(t *testing.T) {
	r := newRun(t)
	answers := []func() (activities.RequestResult, error){}
	for i := 1; i <= 5; i++ {
		answers = append(answers, answered500(i))
	}
	r.requestReturns(append(answers, accepted(6))...)
	var at []time.Duration
	lookup := func(activities.LookupInput) (activities.LookupResult, error) {
		at = append(at, r.env.Now().Sub(r.start))
		return nothingFound(activities.LookupInput{})
	}
	r.lookupReturns(lookup, lookup, lookup, lookup, lookup, found(gateway.StatusSuccess))
	requireConfirmed(t, r, r.execute(t))
	require.Len(t, at, 5)
	grace := workflows.DefaultTuning().AnsweredGrace
	assert.Equal(t, grace, at[0].Round(100*time.Millisecond), "the first lookup after one grace")
	for i := 1; i < 5; i++ {
		assert.Equal(t, 2*grace, (at[i] - at[i-1]).Round(100*time.Millisecond), "lookup %d two graces after the last", i+1)
	}
}
