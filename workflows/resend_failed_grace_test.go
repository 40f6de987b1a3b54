package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The first create is answered 500 after creating T1, which the gateway
// lists only 2 s after the lookup that granted the re-send (the residual
// the earlier review rounds model: TestARefusalHeldAtTheDeadlineIsSearchedAfterItsGrace).
// The re-send is accepted (T2) and the gateway decides it FAILED a second
// later (pgsim processes in 1–5 s). decide held that FAILED for a search
// by order id, but made the search at once, inside the re-send's grace:
// it listed T2 FAILED only, and the order was settled FAILED. T1's
// SUCCESS, listed a second later, was refunded as a late charge: charged,
// then refunded, a lost order. A refused re-send waits that grace before
// its search decides (resend); an accepted one whose FAILED comes fast
// must too.
func TestAFastFailedOfAnAcceptedReSendIsSearchedAfterItsGrace(t *testing.T) {
	fastFailedOfAnAcceptedReSend(t, nil)
}

// The same, with a lookup hint (an unsigned callback naming a key the
// workflow does not track) half a second after the FAILED: its search, made
// inside the grace too, must not decide the held FAILED either.
func TestAHintsSearchInsideAReSendsGraceDoesNotDecideItsFailed(t *testing.T) {
	fastFailedOfAnAcceptedReSend(t, func(r *run) {
		r.env.RegisterDelayedCallback(func() {
			r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: "20261130:TR:forged", Status: gateway.StatusFailed})
		}, 2500*time.Millisecond)
	})
}

func fastFailedOfAnAcceptedReSend(t *testing.T, more func(*run)) {
	r := newRun(t)
	if more != nil {
		more(r)
	}
	r.requestReturns(answered500(1), accepted(2))
	var listedFrom time.Time
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		now := r.env.Now()
		r.mu.Lock()
		resent := len(r.sent) >= 2
		r.mu.Unlock()
		if !resent {
			listedFrom = now.Add(2 * time.Second) // the grant's lookup
			return nothingFound(in)
		}
		return listedAfterReSend(in, now, listedFrom)
	})
	r.callbackAt(2*time.Second, gateway.StatusFailed, txKey) // T2 decided 1 s after the re-send
	r.cancelsMaybe()
	st := r.execute(t)
	t.Logf("final %s/%s %s at %s, %d lookups, grants %q", st.Status, st.PaymentStatus, st.TransactionKey, r.env.Now().Sub(r.start), len(r.lookups), grants(r))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"T2's FAILED was decided by a search inside the re-send's grace; T1, listed SUCCESS a second later, was lost")
	assert.Equal(t, t1, st.TransactionKey)
	assert.Empty(t, r.cancels, "T1 is the order's charge; T2 FAILED needs no cancel")
}

// t1 is the first create's transaction, listed SUCCESS late; txKey (T2)
// is the re-send's, which the gateway decided FAILED.
const t1 = "20261130:TR:0000T1"

// listedAfterReSend is the gateway's answer, as of now, to a lookup once
// the re-send went out: T2 FAILED by its key; in the order's list T2 and,
// from listedFrom on, T1 SUCCESS.
func listedAfterReSend(in activities.LookupInput, now, listedFrom time.Time) (activities.LookupResult, error) {
	t2 := gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: gateway.StatusFailed, Reason: "LIMIT_EXCEEDED"}
	if in.TransactionKey == txKey {
		return activities.LookupResult{Transactions: []gateway.Transaction{t2}}, nil
	}
	txs := []gateway.Transaction{t2}
	if !now.Before(listedFrom) {
		txs = append(txs, gateway.Transaction{TransactionKey: t1, OrderID: orderID, Amount: amount, Status: gateway.StatusSuccess})
	}
	return activities.LookupResult{Transactions: txs}, nil
}
