package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
)

// A lookup by order id reads each listed transaction by key for its
// amount. Each of those gateway calls goes through the breaker on its own:
// a fleet breaker's lease covers one call, so a half-open trial that made
// all of them under one lease could outlive it, and a second trial start
// beside it.
func TestEachGatewayCallOfALookupByOrderIsABreakerCallOfItsOwn(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	other, err := r.client.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 1, CardType: "KB",
		CardNo: "9999-9999-9999-9999", CallbackURL: "http://127.0.0.1:1/nowhere"}, "u1", "")
	require.NoError(t, err)
	own := r.requestAccepted(t, "order-1")
	before := r.breaker.Counts().Requests

	v, err := r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "order-1", UserID: "u1"})
	require.NoError(t, err)
	var res activities.LookupResult
	require.NoError(t, v.Get(&res))
	require.Len(t, res.Transactions, 1)
	assert.Equal(t, own.TransactionKey, res.Transactions[0].TransactionKey)
	require.Len(t, res.Others, 1)
	assert.Equal(t, other.TransactionKey, res.Others[0].TransactionKey)
	assert.Equal(t, uint32(3), r.breaker.Counts().Requests-before,
		"the search and each of its two reads by key, one breaker call each")
}
