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

// The wait keeps one timer: the next poll,
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

// The deadline kept to the second however it meets the polls, with no
// extra lookup spent on it.
func TestTheDeadlineKeepsItsSingleTimer(t *testing.T) {
	pending := found(gateway.StatusPending)
	// An open lookup breaker that may let a lookup through only in 50 s.
	openLong := func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable", activities.ErrLookupUnavailable,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{activities.Unavailable{RetryAfter: 50 * time.Second}}})
	}
	for _, tc := range []struct {
		name      string
		deadline  time.Duration
		lookup    func(activities.LookupInput) (activities.LookupResult, error)
		callbacks []time.Duration // PENDING callbacks, which decide nothing
		lookups   []time.Duration // when each lookup is asked
		last      string          // the last lookup's result, when it matters
	}{{
		// Shorter than --poll-initial (5 s): the first timer is the
		// deadline's; the only lookup is the last one.
		name: "deadline before the first poll", deadline: 3 * time.Second, lookup: pending,
		lookups: []time.Duration{3 * time.Second},
	}, {
		// Due exactly when a poll is (5 s, then 10 s later): a poll at 5 s,
		// then the deadline's last lookup at 15 s, not both side by side.
		name: "deadline falling on a poll", deadline: 15 * time.Second, lookup: pending,
		lookups: []time.Duration{5 * time.Second, 15 * time.Second},
	}, {
		// The breaker-timed poll (in 50 s) is brought forward to the
		// deadline, where the last lookup is tried.
		name: "breaker-timed poll beyond the deadline", deadline: 20 * time.Second, lookup: openLong,
		lookups: []time.Duration{5 * time.Second, 20 * time.Second}, last: "UNAVAILABLE",
	}, {
		// Callbacks that do not decide wake the wait without moving its
		// timer: polls on the backoff, the deadline on time.
		name: "undeciding callbacks", deadline: 17 * time.Second, lookup: pending,
		callbacks: []time.Duration{2 * time.Second, 4 * time.Second, 7 * time.Second, 13 * time.Second},
		lookups:   []time.Duration{5 * time.Second, 15 * time.Second, 17 * time.Second},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			r.requestReturns(accepted(1))
			at := r.lookupsAt(tc.lookup)
			r.cancelsSucceed(0)
			for _, d := range tc.callbacks {
				r.callbackAt(d, gateway.StatusPending, txKey)
			}
			in := order
			in.Deadline = tc.deadline
			st := r.executeWith(t, in)
			assert.Equal(t, status.OrderCancelled, st.Status)
			require.Len(t, r.orderEnd, 1)
			assert.Equal(t, "deadline passed without a definitive answer", r.orderEnd[0].Cause)
			assert.Equal(t, tc.deadline, r.endedAt[0].Sub(r.start).Round(time.Second), "compensated at the deadline")
			assert.Equal(t, tc.lookups, roundAll(*at))
			if tc.last != "" {
				assert.Equal(t, tc.last, st.LastLookup.Result)
			}
		})
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Second)
	}
	return out
}
