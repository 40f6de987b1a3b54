package activities_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
)

// A 404 is "no such transaction" only when it is the gateway's own word
// about a key (errorCode NOT_FOUND). A lookup by order id answers an
// unknown order 200 with an empty list, so a 404 there, or a 404 on a key
// with another code (pgsim's injected instability says INTERNAL_ERROR),
// is a lookup that failed and is retried — never an empty answer, which
// could grant a re-send.
func TestALookup404IsNoSuchTransactionOnlyInTheGatewaysOwnWords(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	created := r.requestAccepted(t, "order-1")

	for name, in := range map[string]activities.LookupInput{
		"by order": {OrderID: "order-1"},
		"by key":   {OrderID: "order-1", TransactionKey: created.TransactionKey},
	} {
		testenv.PatchFaults(t, r.sim, map[string]any{"lookup": map[string]any{"failNext": 1, "errorStatus": http.StatusNotFound}})
		_, err := r.env.ExecuteActivity(r.acts.LookupPayment, in)
		require.Error(t, err, "%s: a 404 INTERNAL_ERROR is no answer", name)
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrLookupFailed, kind, name)
		assert.True(t, retry, name)
	}

	v, err := r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "order-1", TransactionKey: "no-such-key"})
	require.NoError(t, err, "the gateway's 404 NOT_FOUND for a key is an answer")
	var res activities.LookupResult
	require.NoError(t, v.Get(&res))
	assert.Empty(t, res.Transactions)
}
