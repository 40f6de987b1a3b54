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

// The refused re-send is held (heldFailed, key "") and
// its search cannot be made (lookup breaker open, or only searches fail).
// A SIGNED callback then says the first create's transaction T1 is PENDING:
// T1 is tracked, the order waits for it, and every later poll is a lookup
// by T1's key, not a search — so heldFailed is never cleared. At the
// deadline deadlinePassed settles the held refusal FAILED although the
// workflow knows T1 is live (and, in the second case, the deadline's own
// lookup just said PENDING): the stock is released under a live charge and
// T1 is never cancelled at the gateway (compensate would cancel it). The
// rule broken is decide's: "a FAILED only when no other transaction of the
// order is live" — the held refusal skips it at the deadline.
func TestAHeldRefusalDoesNotFailTheOrderUnderALiveTransaction(t *testing.T) {
	for _, c := range []struct {
		name   string
		lookup func(activities.LookupInput) (activities.LookupResult, error)
	}{
		{"lookup breaker open", breakerOpen},
		{"only the search fails", func(in activities.LookupInput) (activities.LookupResult, error) {
			if in.TransactionKey == "" {
				return lookupDown(in)
			}
			return found(gateway.StatusPending)(in)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
			first := true
			r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
				if first { // the proof's lookup: T1 not listed yet
					first = false
					return nothingFound(in)
				}
				return c.lookup(in)
			})
			var cancelled []string
			r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.CancelInput) (activities.CancelResult, error) {
				cancelled = append(cancelled, in.TransactionKeys...)
				return activities.CancelResult{Transactions: []gateway.Transaction{{TransactionKey: txKey, OrderID: orderID, Status: gateway.StatusCancelled}}}, nil
			}).Maybe()
			r.callbackAt(time.Minute, gateway.StatusPending, txKey)
			st := r.execute(t)
			t.Logf("final %s/%s reason %q, cancelled at gateway %v, lookups %d", st.Status, st.PaymentStatus, st.Reason, cancelled, len(r.lookups))
			if st.Status == status.OrderFailed {
				assert.Contains(t, cancelled, txKey,
					"order settled FAILED (stock released) while T1 %s is known PENDING and was never cancelled at the gateway", txKey)
			}
		})
	}
}

// The hole the fix names — the lookup behind the grant
// came before the gateway listed the first create's transaction T1 — is
// answered by a search made at once, within the same instant of workflow
// time as that lookup. A gateway that lists T1 a couple of seconds later
// (well inside the order's 10 min deadline, and inside the answered grace
// the workflow itself waited before the grant's lookup) is not seen: the
// refusal decides FAILED, the stock is released, and T1's SUCCESS is
// refunded as a late charge — the lost order the commit says it closes.
func TestARefusedReSendsSearchWaitsForTheFirstCreatesTransaction(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED"))
	var listedFrom time.Time
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		now := r.env.Now()
		if listedFrom.IsZero() { // the proof's lookup: T1 lands at the gateway 2 s later
			listedFrom = now.Add(2 * time.Second)
		}
		if now.Before(listedFrom) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	})
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	st := r.execute(t)
	t.Logf("final %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"T1 was listed SUCCESS 2 s after the grant's lookup, within the deadline: the refused re-send's search came too soon (lost order)")
}
