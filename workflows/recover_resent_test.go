package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// t1Key is the first create's transaction: answered 500 after the gateway
// made it, unlisted by the lookup that granted the re-send (T2, txKey).
const t1Key = "20261130:TR:0000t1"

// acceptedReSendRecovery is a run of RecoverWorkflow on an order whose
// workflow is gone after an accepted re-send: attempts #1 UNKNOWN (a 500),
// #2 ACCEPTED under the grant resend-1 as T2. The test sets the lookups.
func acceptedReSendRecovery(t *testing.T) *run {
	r := newRun(t)
	r.recovering(activities.RecoveryOrder{Order: store.Order{Status: status.OrderPending, PaymentStatus: status.PaymentPending, TransactionKey: txKey, Attempts: 2},
		Keys: []string{txKey}, MaybeSent: true, Resends: 1, Deadline: r.start.Add(10 * time.Minute)})
	return r
}

// both lists T1 SUCCESS and T2 FAILED to a search, T2 FAILED to a lookup
// by T2's key.
func both(in activities.LookupInput) (activities.LookupResult, error) {
	t2 := gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: gateway.StatusFailed, Reason: "LIMIT_EXCEEDED"}
	if in.TransactionKey != "" {
		return activities.LookupResult{Transactions: []gateway.Transaction{t2}}, nil
	}
	return activities.LookupResult{Transactions: []gateway.Transaction{
		{TransactionKey: t1Key, OrderID: orderID, Amount: amount, Status: gateway.StatusSuccess}, t2}}, nil
}

// A PaymentWorkflow holds a FAILED after a re-send for a search by order id
// (decide: the first create may have made a transaction no answer named).
// Its recovery read the order with resends = 0 and settled the re-send's
// FAILED at once, without that search: the recovery's own search refused
// by the open lookup breaker, T2's signed FAILED callback (the gateway
// retrying the one the gone workflow missed) at 1 s settled the order
// FAILED; T1, SUCCESS and listed from 5 s on, well within the deadline, was
// refunded by the sweep as a late charge — charged, then refunded: a lost
// order. Likewise a poll by T2's key after a search that lists T2 PENDING
// only (the recovery started inside T1's listing lag).
func TestARecoveryAfterAnAcceptedReSendSearchesBeforeFailing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		early func(activities.LookupInput) (activities.LookupResult, error)
	}{
		{"callback while lookups are refused", breakerOpen},
		{"poll by key after a search listing T2 only", found(gateway.StatusPending)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acceptedReSendRecovery(t)
			listedFrom := r.start.Add(5 * time.Second)
			r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
				switch {
				case r.env.Now().Before(listedFrom) && tc.name == "poll by key after a search listing T2 only" && in.TransactionKey != "":
					return found(gateway.StatusFailed)(in) // the gateway decided T2
				case r.env.Now().Before(listedFrom):
					return tc.early(in)
				}
				return both(in)
			})
			if tc.name == "callback while lookups are refused" {
				r.callbackAt(time.Second, gateway.StatusFailed, txKey)
			}
			st, took := r.recoverOrder(t)
			assert.Equal(t, status.OrderConfirmed, st.Status,
				"the re-send's FAILED settled the order without a search; T1, SUCCESS, listed within the deadline (lost order)")
			assert.Equal(t, t1Key, st.TransactionKey)
			assert.Less(t, took, time.Minute, "held past the gateway's answer")
		})
	}
}

// An operator's reset to the first task of an order held after an accepted
// re-send (#1 answered 500, #2 ACCEPTED under resend-1 as T2; the first run
// held T2's FAILED for a search): the run again read the order back with
// resends = 0, its create reported T2, and the first poll by T2's key
// (FAILED) settled the order FAILED without a search. T1, SUCCESS at the
// gateway and listed by then, was refunded by the sweep as a late charge:
// charged, then refunded. Reserve now reads the re-sends (Resends) and the
// run holds the FAILED as the first run did.
func TestARunAgainAfterAnAcceptedReSendSearchesBeforeFailing(t *testing.T) {
	r := newRun(t)
	r.reserveSet = true
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(activities.ReserveResult{Order: store.Order{OrderID: orderID,
		Status: status.OrderPending, PaymentStatus: status.PaymentPending, TransactionKey: txKey, Attempts: 2},
		MaybeSent: true, Resends: 1}, nil)
	r.requestReturns(accepted(2)) // the store reports the recorded answer
	r.lookupReturns(both)
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	st := r.execute(t)
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the re-send's FAILED settled the order without a search; T1 was SUCCESS at the gateway (lost order)")
	assert.Equal(t, t1Key, st.TransactionKey)
}

// The same reset after a refused re-send (#1 answered 500, #2 REJECTED
// under resend-1; the first run held the refusal for a search): the run
// again's create reported the recorded refusal, and run settled it FAILED
// at once, as a first create's refusal. T1, SUCCESS at the gateway, was
// refunded as a late charge. The refusal is held as resend holds it.
func TestARunAgainAfterARefusedReSendSearchesBeforeFailing(t *testing.T) {
	r := newRun(t)
	r.reserveSet = true
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(activities.ReserveResult{Order: store.Order{OrderID: orderID,
		Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		MaybeSent: true, Resends: 1}, nil)
	r.requestReturns(failing(activities.ErrGatewayRejected, false, 2, "LIMIT_EXCEEDED")) // the recorded answer
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{Transactions: []gateway.Transaction{
			{TransactionKey: t1Key, OrderID: orderID, Amount: amount, Status: gateway.StatusSuccess}}}, nil
	})
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	st := r.execute(t)
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the recorded refusal of the re-send failed the order without a search; T1 was SUCCESS at the gateway (lost order)")
	assert.Equal(t, t1Key, st.TransactionKey)
}
