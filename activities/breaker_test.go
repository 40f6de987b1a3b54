package activities_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/store"
)

type noView struct{}

func (noView) BreakerState(string, gobreaker.State, gobreaker.State) {}
func (noView) StoreCall(string, string, time.Duration, error)        {}
func (noView) Fallback(string, bool)                                 {}

// Creates behind the fleet's request breaker (shared through the test's
// database): a create answered 5xx is the gateway up, not counted against
// it; creates a dead gateway never answers trip it; then a create is not
// attempted — nothing recorded, nothing sent — and comes back retryable
// after the time until half-open; after recovery the held-back order's
// create goes out once.
func TestCreatesBehindTheRequestBreaker(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	settings := activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 3, FailureRate: 0.5, OpenFor: 2 * time.Second, HalfOpenCalls: 1}
	creates := breaker.New(activities.CreateRules(settings), r.store.SharedBreakers(2*time.Second), noView{}, testenv.Logger(t))
	t.Cleanup(creates.Close)
	acts := activities.New(r.store, r.client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway", Creates: creates}, observer{r})
	r.env.RegisterActivity(acts)
	_, err := r.store.SetStock(t.Context(), "P1", 100)
	require.NoError(t, err)

	testenv.PatchFaults(t, r.sim, map[string]any{"create": map[string]any{"errorRate": 1, "errorStatus": 503}})
	r.reserve(t, "order-1")
	_, err = r.env.ExecuteActivity(acts.RequestPayment, request("order-1"))
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrGatewayOutcomeUnknown, kind, "a 5xx is an unknown outcome")
	assert.False(t, retry)
	assert.EqualValues(t, 1, creates.Counts().TotalSuccesses, "and the gateway answering: not counted against it")

	testenv.PatchFaults(t, r.sim, map[string]any{"down": true, "create": map[string]any{"errorRate": 0}})
	for _, id := range []string{"order-2", "order-3"} {
		r.reserve(t, id)
		_, err := r.env.ExecuteActivity(acts.RequestPayment, request(id))
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrGatewayUnreachable, kind, "a dead gateway: the create never reached it")
		assert.True(t, retry)
	}
	require.Equal(t, gobreaker.StateOpen, creates.State())
	sent := r.sim.Stats().Requests["create"]
	require.Equal(t, 1, sent)

	r.reserve(t, "order-4")
	_, err = r.env.ExecuteActivity(acts.RequestPayment, request("order-4"))
	kind, retry = appError(t, err)
	assert.Equal(t, activities.ErrRequestBreakerOpen, kind)
	assert.True(t, retry, "never sent: safe to retry")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	assert.Greater(t, appErr.NextRetryDelay(), time.Duration(0))
	assert.LessOrEqual(t, appErr.NextRetryDelay(), settings.OpenFor+settings.OpenFor/5+200*time.Millisecond,
		"the retry delay is the time until half-open, plus jitter")
	assert.Equal(t, sent, r.sim.Stats().Requests["create"], "the gateway saw no create while the breaker was open")
	assert.Empty(t, r.attempts(t, "order-4"), "a refused create is not recorded as an attempt")

	// order-1's UNKNOWN stands: a retry of it is not sent (the store's
	// rule), breaker or not.
	testenv.PatchFaults(t, r.sim, map[string]any{"down": false})
	testenv.Eventually(t, 5*time.Second, func() bool { return creates.State() == gobreaker.StateHalfOpen }, "the breaker half-opens")
	v, err := r.env.ExecuteActivity(acts.RequestPayment, request("order-4"))
	require.NoError(t, err)
	var res activities.RequestResult
	require.NoError(t, v.Get(&res))
	assert.NotEmpty(t, res.TransactionKey)
	assert.Equal(t, gobreaker.StateClosed, creates.State(), "the trial create closed it")
	require.Len(t, r.attempts(t, "order-4"), 1)
	assert.Equal(t, store.OutcomeAccepted, r.attempts(t, "order-4")[0].Outcome)
	assert.Equal(t, sent+1, r.sim.Stats().Requests["create"])

	_, err = r.env.ExecuteActivity(acts.RequestPayment, request("order-1"))
	kind, _ = appError(t, err)
	assert.Equal(t, activities.ErrGatewayOutcomeUnknown, kind, "an earlier UNKNOWN is never cleared by the breaker")
	assert.Equal(t, sent+1, r.sim.Stats().Requests["create"], "and nothing was re-sent for it")
}

// A create refused by the open request breaker is answered from memory,
// reading nothing, whatever the order's attempts hold: "not sent now",
// retryable, nothing recorded. A create sent before (its sender died, or
// its result was lost) is the database's to report once the breaker lets
// the create through (store.BeginAttempt), and a compensation's cancel is
// refused while it may be at the gateway (store.Cancel; the real-stack
// proof is TestCreateHeldByTheBreakerPastTheDeadlineCancelsTheFirstCreate).
func TestRefusedCreateReadsNothing(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	settings := activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 1, FailureRate: 0.5, OpenFor: time.Minute, HalfOpenCalls: 1}
	creates := breaker.New(activities.CreateRules(settings), r.store.SharedBreakers(2*time.Second), noView{}, testenv.Logger(t))
	t.Cleanup(creates.Close)
	acts := activities.New(r.store, r.client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway", Creates: creates}, observer{r})
	r.env.RegisterActivity(acts)
	_, err := r.store.SetStock(t.Context(), "P1", 100)
	require.NoError(t, err)
	require.ErrorIs(t, creates.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	require.Equal(t, gobreaker.StateOpen, creates.State())

	// order-1: a worker began a create and died before recording its answer.
	r.reserve(t, "order-1")
	_, err = r.store.BeginAttempt(t.Context(), store.AttemptRequest{OrderID: "order-1"})
	require.NoError(t, err)
	// order-2: the gateway accepted; the activity's result was lost.
	r.reserve(t, "order-2")
	begun, err := r.store.BeginAttempt(t.Context(), store.AttemptRequest{OrderID: "order-2"})
	require.NoError(t, err)
	require.NoError(t, r.store.FinishAttempt(t.Context(), store.Answer{OrderID: "order-2", No: begun.Attempt.No,
		Outcome: store.OutcomeAccepted, TransactionKey: "tx-2"}))
	for _, id := range []string{"order-1", "order-2"} {
		before := r.attempts(t, id)
		_, err = r.env.ExecuteActivity(acts.RequestPayment, request(id))
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrRequestBreakerOpen, kind, id)
		assert.True(t, retry, id)
		assert.Equal(t, before, r.attempts(t, id), "%s: the refusal touched no attempt", id)
	}

	// order-3: nothing sent yet: refused, retryable, nothing recorded.
	r.reserve(t, "order-3")
	_, err = r.env.ExecuteActivity(acts.RequestPayment, request("order-3"))
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrRequestBreakerOpen, kind)
	assert.True(t, retry)
	assert.Empty(t, r.attempts(t, "order-3"))
	assert.Zero(t, r.sim.Stats().Requests["create"], "the gateway saw no create")
}

// The breakers' rules: a trip on the window's failure share (at least
// MinCalls counted) or on ConsecutiveFailures in a row; risky (a fleet
// call then runs under the shared lease) once one more failure could trip
// it by either.
func TestBreakerRules(t *testing.T) {
	lookup, create := activities.DefaultBreakerSettings(), activities.DefaultRequestBreakerSettings()
	require.EqualValues(t, 3, lookup.ConsecutiveFailures)
	require.EqualValues(t, 3, create.ConsecutiveFailures, "creates count only what a healthy gateway never does: no answer")
	counts := func(ok, failed, inARow uint32) gobreaker.Counts {
		return gobreaker.Counts{Requests: ok + failed, TotalSuccesses: ok, TotalFailures: failed, ConsecutiveFailures: inARow}
	}
	for _, c := range []struct {
		name        string
		rules       breaker.Rules
		counts      gobreaker.Counts
		trip, risky bool
	}{
		{"lookup: empty window: nothing failed yet", activities.LookupRules(lookup), counts(0, 0, 0), false, false},
		{"lookup: one failure in an empty window could tip the rate", activities.LookupRules(lookup), counts(0, 1, 1), false, true},
		{"lookup: two successes and no failure", activities.LookupRules(lookup), counts(2, 0, 0), false, false},
		{"lookup: healthy window, first failure", activities.LookupRules(lookup), counts(30, 1, 1), false, false},
		{"lookup: healthy window, one more failure reaches 3 in a row", activities.LookupRules(lookup), counts(30, 2, 2), false, true},
		{"lookup: healthy window, 3 in a row", activities.LookupRules(lookup), counts(30, 3, 3), true, true},
		{"lookup: failures scattered among successes below the rate", activities.LookupRules(lookup), counts(30, 10, 1), false, false},
		{"lookup: the rate rule, none in a row", activities.LookupRules(lookup), counts(4, 5, 1), true, true},
		{"lookup: 2 failures in a row, under min calls", activities.LookupRules(lookup), counts(2, 2, 2), false, true},
		{"create: healthy window, first unanswered", activities.CreateRules(create), counts(30, 1, 1), false, false},
		{"create: healthy window, one more reaches 3 in a row", activities.CreateRules(create), counts(30, 2, 2), false, true},
		{"create: healthy window, 3 unanswered in a row", activities.CreateRules(create), counts(30, 3, 3), true, true},
		{"create: 10 unanswered scattered, the rate rule", activities.CreateRules(create), counts(10, 10, 1), true, true},
	} {
		assert.Equal(t, c.trip, c.rules.ReadyToTrip(c.counts), "%s: trip", c.name)
		assert.Equal(t, c.risky, c.rules.Risky(c.counts), "%s: risky", c.name)
	}
}

// A process breaker after a window of successes: three connect failures in
// a row open it at once; without the rule it stays closed, waiting for the
// failures to outweigh the window.
func TestConsecutiveFailuresTripAfterAWindowOfSuccesses(t *testing.T) {
	for _, inARow := range []uint32{3, 0} {
		s := activities.DefaultBreakerSettings()
		s.ConsecutiveFailures = inARow
		b := activities.NewLookupBreaker(s, func(string, gobreaker.State, gobreaker.State) {})
		for range 30 {
			require.NoError(t, b.Do(func() error { return nil }))
		}
		for range 3 {
			require.ErrorIs(t, b.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
		}
		want := gobreaker.StateOpen
		if inARow == 0 {
			want = gobreaker.StateClosed
		}
		assert.Equal(t, want, b.State(), "consecutive failures %d", inARow)
	}
}
