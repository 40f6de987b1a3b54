package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// From money-safety version 3 the wait keeps one timer: the next poll,
// brought forward to the deadline when that comes first (await,
// pollTimer). These pin that the deadline is kept to the second however it
// meets the polls, and that no extra lookup is spent on it.

// lookupsAt makes every lookup answer with answer and records when (workflow
// time since the start) it was asked.
func (r *run) lookupsAt(answer func(activities.LookupInput) (activities.LookupResult, error)) *[]time.Duration {
	var at []time.Duration
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.LookupInput) (activities.LookupResult, error) {
		r.mu.Lock()
		r.lookups = append(r.lookups, in)
		at = append(at, r.env.Now().Sub(r.start))
		r.mu.Unlock()
		return answer(in)
	})
	return &at
}

func (r *run) executeWith(t *testing.T, in workflows.PaymentInput) workflows.State {
	t.Helper()
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	return st
}

func requireCompensatedAt(t *testing.T, r *run, st workflows.State, at time.Duration) {
	t.Helper()
	assert.Equal(t, status.OrderCancelled, st.Status)
	require.Len(t, r.orderEnd, 1)
	assert.Equal(t, "deadline passed without a definitive answer", r.orderEnd[0].Cause)
	assert.Equal(t, at, r.endedAt[0].Sub(r.start).Round(time.Second), "compensated at the deadline")
}

// A deadline shorter than --poll-initial (5 s): the first timer is the
// deadline's; the only lookup is the last one, at the deadline.
func TestDeadlineBeforeTheFirstPollIsKept(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	at := r.lookupsAt(found(gateway.StatusPending))
	r.cancelsSucceed(0)
	in := order
	in.Deadline = 3 * time.Second
	st := r.executeWith(t, in)
	requireCompensatedAt(t, r, st, 3*time.Second)
	assert.Equal(t, []time.Duration{3 * time.Second}, roundAll(*at), "one lookup, the last one")
}

// A deadline due exactly when a poll is (5 s, then 10 s later): one lookup
// at 5 s, then the deadline's last lookup at 15 s — not a poll and a last
// lookup side by side.
func TestDeadlineFallingOnAPollIsOneLookup(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	at := r.lookupsAt(found(gateway.StatusPending))
	r.cancelsSucceed(0)
	in := order
	in.Deadline = 15 * time.Second
	st := r.executeWith(t, in)
	requireCompensatedAt(t, r, st, 15*time.Second)
	assert.Equal(t, []time.Duration{5 * time.Second, 15 * time.Second}, roundAll(*at))
}

// An open lookup breaker that may let a lookup through only after the
// deadline: the breaker-timed poll is brought forward to the deadline, where
// the last lookup is tried and the order compensated on time.
func TestBreakerTimedPollBeyondTheDeadlineKeepsTheDeadline(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	at := r.lookupsAt(func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable", activities.ErrLookupUnavailable,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{activities.Unavailable{RetryAfter: 50 * time.Second}}})
	})
	r.cancelsSucceed(0)
	in := order
	in.Deadline = 20 * time.Second
	st := r.executeWith(t, in)
	requireCompensatedAt(t, r, st, 20*time.Second)
	assert.Equal(t, []time.Duration{5 * time.Second, 20 * time.Second}, roundAll(*at))
	assert.Equal(t, "UNAVAILABLE", st.LastLookup.Result)
}

// A callback that does not decide (PENDING) wakes the wait without moving
// its timer: the next poll still comes on the backoff, and the deadline on
// time.
func TestUndecidingCallbacksKeepTheSingleTimer(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	at := r.lookupsAt(found(gateway.StatusPending))
	r.cancelsSucceed(0)
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second, 7 * time.Second, 13 * time.Second} {
		r.callbackAt(d, gateway.StatusPending, txKey)
	}
	in := order
	in.Deadline = 17 * time.Second
	st := r.executeWith(t, in)
	requireCompensatedAt(t, r, st, 17*time.Second)
	assert.Equal(t, []time.Duration{5 * time.Second, 15 * time.Second, 17 * time.Second}, roundAll(*at))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Second)
	}
	return out
}
