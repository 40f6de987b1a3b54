package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// A signed SUCCESS of another amount under the order's id, arriving while
// the FAILED order is being settled: not the order's (every create of it
// asks for its amount; decision of b2589ab), so it neither confirms the
// order nor is the order's charge to refund — the sweep flags it and
// leaves the money alone. drainLate refunded it at the gateway (a charge
// someone else made, of an amount payguard never asked for) and booked the
// order's payment REFUNDED although nothing of the order was charged: the
// books and the money no longer match.
func TestALateSuccessOfAnotherAmountIsNotRefundedAsTheOrders(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.cancelsMaybe()
	r.settleTakes(2 * time.Second)
	r.callbackAt(time.Second, gateway.StatusFailed, txKey)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.CallbackSignal, signed(gateway.Transaction{TransactionKey: "20261130:TR:0000AA",
			OrderID: orderID, Amount: amount + 1, Status: gateway.StatusSuccess}))
	}, 2*time.Second)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentFailed, st.PaymentStatus, "nothing of the order was charged or refunded")
	assert.Empty(t, r.cancels, "another amount's charge is not the order's to refund")
}
