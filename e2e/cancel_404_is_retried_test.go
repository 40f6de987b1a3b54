package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
)

// A cancel answered 404 for a transaction the search by order id has just
// listed is retried: a 404 that is not the gateway's word about that key
// (pgsim's injected instability, a proxy) must not let the compensation
// end the order CANCELLED with its transaction still live at the gateway.
// (Found by review: CancelPayments skipped every key answered 404.)
func TestACancelAnswered404IsRetriedUntilTheTransactionIsCancelled(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Cancel.FailNext, f.Cancel.ErrorStatus = 1, http.StatusNotFound
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	const id = "cancel-404-retried"
	placeOrder(t, s, id, "P1", 1, "--deadline", "6s")
	waitOrder(t, s, id, status.OrderCancelled, 40*time.Second)
	gw := s.Sim.Stats().Orders[id]
	t.Logf("gateway: transactions %v, cancelled %d", gw.Transactions, gw.Cancelled)
	assert.Len(t, gw.Transactions, 1)
	assert.Equal(t, 1, gw.Cancelled, "the order is CANCELLED and its transaction is still PENDING at the gateway")
}
