package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/workflows"
)

// Unsigned callbacks (--callback-auth lookup) are unauthenticated: anyone who
// knows (or guesses) an order id can send them at any rate. (Found by an
// adversarial review; each test failed before its fix.)

// hintsEvery sends a forged hint every period until until (workflow time).
func (r *run) hintsEvery(period, until time.Duration) int {
	n := 0
	for at := period; at <= until; at += period {
		r.env.RegisterDelayedCallback(func() {
			r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: txKey, Status: gateway.StatusSuccess})
		}, at)
		n++
	}
	return n
}

// lookupsTake makes every lookup answer PENDING after d (workflow time).
func (r *run) lookupsTake(d time.Duration) {
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).After(d).Return(func(_ context.Context, in activities.LookupInput) (activities.LookupResult, error) {
		r.mu.Lock()
		r.lookups = append(r.lookups, in)
		r.mu.Unlock()
		return found(gateway.StatusPending)(in)
	})
}

// A steady stream of forged hints, each arriving while the previous hint's
// lookup is still running, keeps the hint channel always ready. The
// selector in await takes the first ready case in the order the cases were
// added (callbacks, hints, poll, deadline), so the deadline timer is never
// selected unless the workflow checks the clock itself: the order must still
// be compensated by its deadline (design §3).
func TestHintFloodCannotStarveTheDeadline(t *testing.T) {
	r := newRun(t)
	r.env.SetTestTimeout(3 * time.Minute)
	r.requestReturns(accepted(1))
	r.lookupsTake(2 * time.Second) // a lookup takes longer than the gap between hints
	r.cancelsSucceed(0)
	in := order
	in.Deadline = 20 * time.Second
	r.hintsEvery(time.Second, 90*time.Second)
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
	assert.True(t, r.env.IsWorkflowCompleted())
	if assert.NotEmpty(t, r.endedAt, "compensated") {
		took := r.endedAt[0].Sub(r.start)
		t.Logf("deadline %s, compensated after %s, %d lookups", in.Deadline, took, len(r.lookups))
		assert.Less(t, took, in.Deadline+15*time.Second,
			"forged hints held the order %s past its deadline", took-in.Deadline)
	}
}

// Each hint lookup costs an activity (3 history events and a workflow task)
// and a gateway call through the shared breaker: at most one per
// --poll-initial, so a sender cannot scale lookups or history. With no hints
// the same 10 minutes cost ~14 polls.
func TestHintLookupsAreRateLimited(t *testing.T) {
	r := newRun(t)
	r.env.SetTestTimeout(2 * time.Minute)
	r.requestReturns(accepted(1))
	r.lookupsTake(0)
	r.cancelsSucceed(0)
	sent := r.hintsEvery(3*time.Second, 9*time.Minute)
	r.execute(t)
	t.Logf("%d forged hints -> %d lookups", sent, len(r.lookups))
	assert.Less(t, len(r.lookups), 40, "lookups should be bounded (e.g. at most one hint lookup per poll interval), not one per forged hint")
}

// A create "accepted" with no transaction key (the client takes a
// 200 SUCCESS envelope with data {} as acceptance) leaves the workflow with
// no key and no unknown create: while the gateway knows nothing by order
// id, resendDue is true at every poll, so the workflow records a false
// "create re-sent" anomaly and flips the payment to REQUESTED at each poll
// (the store refuses the actual send: the ACCEPTED attempt stands). The
// client now reports such an answer as unknown; the workflow also never
// re-sends without an unknown outcome.
func TestAcceptedWithoutKeyIsNeverReSent(t *testing.T) {
	r := newRun(t)
	noKey := func() (activities.RequestResult, error) {
		return activities.RequestResult{Attempt: 1, Attempts: 1}, nil
	}
	r.requestReturns(noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey, noKey)
	r.lookupReturns(nothingFound)
	r.cancelsSucceed(0)
	r.execute(t)
	t.Logf("creates asked: %d; anomalies: %q", r.requests, r.anomalies())
	assert.Equal(t, 1, r.requests, "no re-send after an ACCEPTED create")
}

// A hint naming another order's transaction key never makes
// the workflow look that key up: the lookup is by this order's id, and a
// forged SUCCESS decides nothing while the gateway says PENDING.
func TestHintWithForeignKeyLooksUpByOrder(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(found(gateway.StatusPending))
	r.cancelsSucceed(0)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: "20261130:TR:OTHER1", Status: gateway.StatusSuccess})
	}, time.Second)
	st := r.execute(t)
	assert.NotEqual(t, "CONFIRMED", string(st.Status))
	if assert.NotEmpty(t, r.lookups) {
		assert.Empty(t, r.lookups[0].TransactionKey, "by order id")
		assert.Equal(t, orderID, r.lookups[0].OrderID)
	}
	for _, l := range r.lookups {
		assert.NotEqual(t, "20261130:TR:OTHER1", l.TransactionKey)
	}
}
