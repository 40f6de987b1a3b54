package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// A run of the first workflow task again: Reserve answers the order as an
// earlier run of the task left it. The real-server cases are with the e2e
// tests; these pin each branch.

// reserveFinds makes Reserve answer the order as an earlier run left it, and
// an operator's cancel come with it (as in a run again, it is in the history
// before Reserve answers).
func (r *run) reserveFinds(o store.Order, maybeSent bool) {
	r.reserveSet = true
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(activities.ReserveResult{Order: o, MaybeSent: maybeSent}, nil)
	r.env.RegisterDelayedCallback(func() { r.env.CancelWorkflow() }, 0)
}

// The earlier run settled CONFIRMED (its callback's SUCCESS is in the
// history again): the order ends CONFIRMED, its charge kept, nothing sent,
// settled or cancelled again, and the repeated answer is no anomaly.
func TestRunAgainKeepsTheConfirmedOrderOfTheFirstRun(t *testing.T) {
	r := newRun(t)
	r.reserveFinds(store.Order{OrderID: orderID, Status: status.OrderConfirmed, PaymentStatus: status.PaymentSuccess,
		TransactionKey: txKey, Attempts: 1}, true)
	r.callbackAt(0, gateway.StatusSuccess, txKey)
	st := r.execute(t)
	require.NoError(t, r.env.GetWorkflowError(), "ends as the order did, not cancelled")
	assert.Equal(t, status.OrderConfirmed, st.Status)
	assert.Equal(t, status.PaymentSuccess, st.PaymentStatus)
	assert.Equal(t, txKey, st.TransactionKey)
	assert.Zero(t, r.requests, "no create sent")
	assert.Empty(t, r.cancels, "the confirmed charge is not cancelled")
	assert.Empty(t, r.orderEnd, "no compensation")
	assert.Empty(t, r.settles, "settled once, by the earlier run")
	assert.Empty(t, r.anomalies())
}

// A second charge's SUCCESS in the history is still refunded.
func TestRunAgainOverAConfirmedOrderRefundsAnotherCharge(t *testing.T) {
	r := newRun(t)
	r.cancelsSucceed(1)
	r.reserveFinds(store.Order{OrderID: orderID, Status: status.OrderConfirmed, PaymentStatus: status.PaymentSuccess,
		TransactionKey: txKey, Attempts: 1}, true)
	r.callbackAt(0, gateway.StatusSuccess, "20261130:TR:000002")
	st := r.execute(t)
	require.NoError(t, r.env.GetWorkflowError())
	assert.Equal(t, status.OrderConfirmed, st.Status)
	require.Len(t, r.cancels, 1)
	assert.Equal(t, []string{"20261130:TR:000002"}, r.cancels[0].TransactionKeys)
}

// The earlier run settled FAILED, and the payment has since been refunded
// (a late charge, after a reset to the first task): the order ends as the
// database has it, with no Settle FAILED over REFUNDED.
func TestRunAgainEndsTheFailedOrderOfTheFirstRun(t *testing.T) {
	r := newRun(t)
	r.reserveFinds(store.Order{OrderID: orderID, Status: status.OrderFailed, PaymentStatus: status.PaymentRefunded,
		PaymentReason: "LIMIT_EXCEEDED", Attempts: 1}, false)
	st := r.execute(t)
	require.NoError(t, r.env.GetWorkflowError())
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentRefunded, st.PaymentStatus)
	assert.Equal(t, "LIMIT_EXCEEDED", st.Reason)
	assert.Zero(t, r.requests, "no create sent")
	assert.Empty(t, r.cancels)
	assert.Empty(t, r.settles)
}

// The earlier run compensated (CANCELLED): compensation runs again, as a
// repeat, and the run ends cancelled under the operator's cancel.
func TestRunAgainCompensatesTheCancelledOrderOfTheFirstRunAgain(t *testing.T) {
	r := newRun(t)
	r.reserveFinds(store.Order{OrderID: orderID, Status: status.OrderCancelled, PaymentStatus: status.PaymentCancelled, Attempts: 1}, false)
	st := r.execute(t)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, r.env.GetWorkflowError(), &canceled)
	assert.Equal(t, status.OrderCancelled, st.Status)
	assert.Zero(t, r.requests, "no create sent")
	assert.Empty(t, r.cancels, "no create reached the gateway")
	require.Len(t, r.orderEnd, 1)
}

// An open order the first run sent a create for: the cancel searches the
// gateway only when that create may have reached it.
func TestRunAgainUnderACancelSearchesTheGatewayOnlyForACreateThatMayHaveReachedIt(t *testing.T) {
	for _, maybeSent := range []bool{true, false} {
		r := newRun(t)
		if maybeSent {
			r.cancelsSucceed(0)
		}
		r.reserveFinds(store.Order{OrderID: orderID, Status: status.OrderRequesting, PaymentStatus: status.PaymentRequested, Attempts: 1}, maybeSent)
		st := r.execute(t)
		var canceled *temporal.CanceledError
		require.ErrorAs(t, r.env.GetWorkflowError(), &canceled)
		assert.Equal(t, status.OrderCancelled, st.Status)
		assert.Zero(t, r.requests, "no create sent after the cancel")
		require.Len(t, r.orderEnd, 1)
		if maybeSent {
			require.Len(t, r.cancels, 1)
			assert.True(t, r.cancels[0].SearchByOrder)
			assert.Equal(t, status.PaymentCancelled, r.orderEnd[0].Payment)
		} else {
			assert.Empty(t, r.cancels, "a create refused at the dial never reached the gateway")
		}
	}
}

// A compensation whose CancelOrder finds the order FAILED (a refused
// re-send settled by an earlier run of its task) after refunding another
// charge of the order: FAILED stands, the payment is recorded REFUNDED, and
// the workflow completes.
func TestCompensationOverAFailedOrderRecordsTheRefundAndCompletes(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(found(gateway.StatusPending))
	r.cancelsSucceed(1)
	r.cancelOrderErr = temporal.NewNonRetryableApplicationError("illegal order status transition FAILED -> CANCELLED",
		activities.ErrIllegalTransition, nil, activities.Transition{Entity: "order", From: string(status.OrderFailed), To: string(status.OrderCancelled)})
	r.env.RegisterDelayedCallback(func() { r.env.CancelWorkflow() }, 30*time.Second)
	st := r.execute(t)
	require.NoError(t, r.env.GetWorkflowError(), "the order ended FAILED: the workflow completes")
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentRefunded, st.PaymentStatus)
	require.Len(t, r.cancels, 1)
	require.NotEmpty(t, r.settles)
	last := r.settles[len(r.settles)-1]
	assert.Equal(t, status.PaymentRefunded, last.Payment, "the refund is recorded")
}
