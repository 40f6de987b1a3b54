package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
)

// A compensation's search by order id cancelled every transaction listed
// under the order's id, one of another amount too (anyone who can create
// at the gateway can make one: b2589ab), and counted it: a charge of 1
// that payguard never asked for was refunded, and the order, of which
// nothing was charged, booked REFUNDED (out.Refunded), a refunds row and
// payguard_charges_refunded_total for it. The lookup and the sweep leave
// such a transaction out, money untouched; so does the search now. The
// order's own transaction is still cancelled and refunded.
func TestACompensationsSearchLeavesAChargeOfAnotherAmount(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1") // amount 5000
	cheap, err := r.client.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 1, CardType: "KB",
		CardNo: "9999-9999-9999-9999", CallbackURL: "http://127.0.0.1:1/nowhere"}, "u1", "")
	require.NoError(t, err)
	testenv.Resolve(t, r.sim, cheap.TransactionKey, "SUCCESS", "", false)
	created := r.requestAccepted(t, "order-1")
	testenv.Resolve(t, r.sim, created.TransactionKey, "SUCCESS", "", false)

	v, err := r.env.ExecuteActivity(r.acts.CancelPayments, activities.CancelInput{OrderID: "order-1", UserID: "u1", SearchByOrder: true})
	require.NoError(t, err)
	var res activities.CancelResult
	require.NoError(t, v.Get(&res))
	assert.Equal(t, 1, res.Refunded, "the order's own charge only")
	var cancelled []string
	for _, tx := range res.Transactions {
		cancelled = append(cancelled, tx.TransactionKey)
	}
	assert.Equal(t, []string{created.TransactionKey}, cancelled)
	left, err := r.client.Payment(context.Background(), cheap.TransactionKey)
	require.NoError(t, err)
	assert.Equal(t, gateway.StatusSuccess, left.Status, "the charge of another amount is left as it is")
}
