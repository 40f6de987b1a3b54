package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
)

// A lookup by order id answered 404 is no proof that nothing was charged:
// the gateway's by-order lookup answers 200 with an empty list for an order
// it does not know (gateway-api.md), so a 404 there is a route that is not
// there (a proxy, a deploy, pgsim's injected instability, whose body says
// INTERNAL_ERROR). Here the first create made a transaction and answered
// 500, the lookups after the grace got an injected 404: no create may go
// out again, and the lookup that gets through finds the transaction.
// (Found by review: the 404 was taken as an empty list, granted a re-send,
// and the order had two transactions.)
func TestALookupByOrderAnswered404GrantsNoResend(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Create.CreatedThen500Rate = 1                                  // the transaction made, then a complete 500
	f.Lookup.FailNext, f.Lookup.ErrorStatus = 4, http.StatusNotFound // the first lookups answered 404 INTERNAL_ERROR
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	const id = "lookup-404-proof"
	placeOrder(t, s, id, "P1", 1, "--deadline", "60s")

	// The first create's transaction is there from the start; wait until a
	// lookup after the 404 has found it (its key recorded on the payment).
	testenv.Eventually(t, 40*time.Second, func() bool {
		o, err := s.Store.GetOrder(context.Background(), id)
		return err == nil && o.TransactionKey != ""
	}, "a lookup finds the order's transaction")
	attempts, err := s.Store.Attempts(context.Background(), id)
	require.NoError(t, err)
	st := s.Sim.Stats().Orders[id]
	t.Logf("creates %d, transactions %v, attempts %d", st.CreateRequests, st.Transactions, len(attempts))
	assert.Equal(t, 1, st.CreateRequests, "a create was sent again while the first one's transaction stood at the gateway")
	assert.Len(t, st.Transactions, 1, "one order, one transaction")
}
