package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The refused re-send's search waits the answered
// grace (proofDue) only on the regular poll timer. poll() lets ANY search
// decide the held refusal, whenever it is made: an unsigned callback (a
// lookup hint, which anyone can send) arriving inside the grace makes the
// search at once, it lists nothing yet, and the order fails — T1, listed
// SUCCESS 2 s after the grant's lookup, is then refunded as a late charge
// (the lost order TestARefusedReSendsSearchWaitsForTheFirstCreatesTransaction
// closes for the timer).
func TestAHintInsideTheGraceDoesNotDecideAHeldRefusal(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	var listedFrom time.Time
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		now := r.env.Now()
		if listedFrom.IsZero() {
			listedFrom = now.Add(2 * time.Second)
		}
		if now.Before(listedFrom) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	})
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	// The proof's lookup comes 1 s in (the answered grace), the refused
	// re-send right after it; the hint half a second later.
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: txKey, Status: gateway.StatusSuccess})
	}, 1500*time.Millisecond)
	st := r.execute(t)
	t.Logf("final %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"a hint inside the refused re-send's grace made the search early; T1 listed SUCCESS within the deadline (lost order)")
}

// poll() clears the held refusal on any search, but
// lets it decide only when the gateway's answer is empty. A search whose
// answer holds only another order's transaction (the anomaly onTransactions
// records and skips) clears the hold with nothing decided; the next
// search, empty, then passes resendDue() — proofDue past, NOT_FOUND, no
// key — and the workflow re-sends the create the gateway just REJECTED
// (resend-2). Only the store's "latest REJECTED stands" keeps it from the
// gateway.
func TestAStraySearchAnswerDoesNotTurnAHeldRefusalIntoAReSend(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"),
		failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	stray := func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{Transactions: []gateway.Transaction{{TransactionKey: "20261130:TR:OTHER1", OrderID: "ord-other",
			Amount: amount, Status: gateway.StatusSuccess}}}, nil
	}
	r.lookupReturns(nothingFound, stray, nothingFound)
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	st := r.execute(t)
	t.Logf("final %s/%s after %s, grants %q", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), grants(r))
	assert.Len(t, r.sent, 2, "a create was re-sent after the gateway REJECTED the re-send")
	assert.Equal(t, status.OrderFailed, st.Status)
}

// pollIn() only brings a poll forward to proofDue; a
// regular backoff shorter than the refused re-send's grace still fires
// before it, and that poll is a search that decides the held refusal. With
// --poll-initial 100ms (the answered grace left at 1 s) the proof's lookup
// comes at 1 s after polls at 0.1, 0.3 and 0.7 s; the backoff is then
// 1.6 s, the refused re-send's grace 2 s: the search comes 0.4 s early,
// before T1 is listed, and the order fails — T1's SUCCESS, 2 s after the
// grant's lookup, is refunded (lost order).
func TestAShortBackoffDoesNotSearchAHeldRefusalBeforeItsGrace(t *testing.T) {
	r := newTunedRun(t, func(tu *workflows.Tuning) { tu.PollInitial = 100 * time.Millisecond })
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	var refusedAt, listedFrom time.Time
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		now := r.env.Now()
		if listedFrom.IsZero() && !now.Before(r.start.Add(time.Second)) { // the proof's lookup
			refusedAt, listedFrom = now, now.Add(2*time.Second)
		}
		if listedFrom.IsZero() || now.Before(listedFrom) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	})
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	st := r.execute(t)
	t.Logf("final %s/%s %s after the refusal, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(refusedAt), len(r.lookups))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the refused re-send was searched before its grace by the regular backoff; T1 listed SUCCESS within the deadline (lost order)")
}
