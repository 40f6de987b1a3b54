package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
)

// listedLate answers lookups as a gateway that is unreachable for lookups
// until openUntil (since the run's start), then lists the order's first
// transaction, SUCCESS, only 2 s after the first lookup it answered (the
// refused re-send's residual the earlier review rounds model: T1 created
// before the 500, listed after the grant's lookup).
func (r *run) listedLate(openUntil time.Duration) {
	var listedFrom time.Time
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		now := r.env.Now()
		if now.Before(r.start.Add(openUntil)) {
			return breakerOpen(in)
		}
		if listedFrom.IsZero() {
			listedFrom = now.Add(2 * time.Second)
		}
		if now.Before(listedFrom) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	})
}

// A re-send refused 4xx half a second before the deadline: its held
// refusal's grace (2 s) runs past the deadline. deadlinePassed searched at
// the deadline, inside that grace, saw nothing yet and settled the refusal
// FAILED — the very search the rule forbids ("the refusal decides only
// when a search made after that grace lists no transaction"). T1, listed
// SUCCESS 1.5 s after the deadline, was then refunded as a late charge:
// charged then refunded, a lost order.
func TestARefusalHeldAtTheDeadlineIsSearchedAfterItsGrace(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	in := order
	in.Deadline = 29500 * time.Millisecond
	// Lookups come back at 29 s: the proof's lookup finds nothing, the
	// re-send is refused then.
	r.listedLate(29 * time.Second)
	r.cancelsMaybe()
	st := r.executeWith(t, in)
	t.Logf("final %s/%s at %s, %d lookups, grants %q", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups), grants(r))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the held refusal was decided at the deadline by a search inside its grace; T1 listed SUCCESS 2 s after the grant's lookup (lost order)")
	assert.Empty(t, r.cancels, "nothing to cancel: T1 is the order's charge")
}

// The same, for a re-send answered 500 half a second before the deadline:
// the last lookup and the compensation's search came at the deadline,
// inside the answered grace in which the gateway may not list what that
// create made. The order was CANCELLED, and T2, listed SUCCESS 1.5 s
// later, charged and refunded.
func TestAnUnknownCreateAtTheDeadlineIsLookedUpAfterItsGrace(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), answered500(2))
	in := order
	in.Deadline = 29500 * time.Millisecond
	r.listedLate(29 * time.Second)
	r.cancelsMaybe()
	st := r.executeWith(t, in)
	t.Logf("final %s/%s at %s, %d lookups, grants %q", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups), grants(r))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the deadline's last lookup came inside the grace of a create answered 500; its transaction, listed SUCCESS then, was lost")
}

// cancelsMaybe records the cancels at the gateway, which may not come.
func (r *run) cancelsMaybe() {
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.CancelInput) (activities.CancelResult, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cancels = append(r.cancels, in)
		return activities.CancelResult{}, nil
	}).Maybe()
}
