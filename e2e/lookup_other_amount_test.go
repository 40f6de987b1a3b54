package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// A SUCCESS of another amount found by a lookup does not confirm the
// order: the lookup reads each line by key for its amount and leaves out
// what is not of the order's (found by review: mine() took any SUCCESS,
// and a lookup by order id carries no amount). Here a transaction of 1 for the order's
// id already stands SUCCESS at the gateway (made by whoever can create at
// the gateway: pgsim and the Loopers simulator ask for no credentials, a
// browser-initiated gateway lets the customer do it); the order's own
// create of 5000 is answered 500 (pgsim's 40 % by default), the workflow
// searches by order id, and must not confirm the order on the 1.
func TestASuccessOfAnotherAmountFoundByLookupDoesNotConfirmTheOrder(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 5)
	const id = "other-amount-1"
	gw, err := gateway.New(gateway.Config{BaseURL: s.Sim.GatewayURL()})
	require.NoError(t, err)
	t.Cleanup(gw.Close)
	cheap, err := gw.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: id, Amount: 1, CardType: "KB",
		CardNo: "9999-9999-9999-9999", CallbackURL: "http://127.0.0.1:1/nowhere"}, "user-1", "")
	require.NoError(t, err)
	testenv.Resolve(t, s.Sim, cheap.TransactionKey, "SUCCESS", "", false)

	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"failNext": 1, "errorStatus": 500}})
	placeOrder(t, s, id, "P1", 1, "--deadline", "40s") // amount 5000
	var o store.Order
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if o, err = s.Store.GetOrder(context.Background(), id); err == nil && o.Status.Final() {
			break
		}
	}
	t.Logf("order %s / %s on %q (the 1-won transaction is %s)", o.Status, o.PaymentStatus, o.TransactionKey, cheap.TransactionKey)
	assert.NotEqual(t, cheap.TransactionKey, o.TransactionKey, "the order of 5000 is %s on a charge of 1", o.Status)
	assert.Equal(t, int64(0), stockOf(t, s, "P1").Sold, "stock sold for 1")
}

// The same in lookup mode (--callback-auth lookup, for gateways that
// sign nothing, like the Loopers simulator): no 500 is needed. The order's
// create of 5000 is accepted and PENDING; anyone then makes a transaction of
// 1 for the order's id at the gateway, lets it succeed, and posts an
// unsigned callback naming it. The hint searches the order by id; the
// SUCCESS of 1 must neither confirm the order nor get the order's real
// charge of 5000 cancelled as "another transaction" (found by review).
func TestALookupHintDoesNotConfirmTheOrderOnASuccessOfAnotherAmount(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), lookupMode)
	setStock(t, s, "P1", 5)
	const id = "other-amount-hint"
	placeOrder(t, s, id, "P1", 1) // amount 5000
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)

	gw, err := gateway.New(gateway.Config{BaseURL: s.Sim.GatewayURL()})
	require.NoError(t, err)
	t.Cleanup(gw.Close)
	cheap, err := gw.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: id, Amount: 1, CardType: "KB",
		CardNo: "9999-9999-9999-9999", CallbackURL: "http://127.0.0.1:1/nowhere"}, "user-1", "")
	require.NoError(t, err)
	testenv.Resolve(t, s.Sim, cheap.TransactionKey, "SUCCESS", "", false)
	code, answer := postUnsigned(t, s, gateway.TransactionInfo{TransactionKey: cheap.TransactionKey, OrderID: id, CardType: "KB",
		CardNo: "9999-9999-9999-9999", Amount: 1, Status: gateway.StatusSuccess})
	require.Equal(t, http.StatusOK, code, "%+v", answer)

	var got store.Order
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got, err = s.Store.GetOrder(context.Background(), id); err == nil && got.Status.Final() {
			break
		}
	}
	st := s.Sim.Stats().Orders[id]
	t.Logf("order %s / %s on %q (real %s, cheap %s); gateway successful %d cancelled %d", got.Status, got.PaymentStatus,
		got.TransactionKey, o.TransactionKey, cheap.TransactionKey, st.Successful, st.Cancelled)
	assert.NotEqual(t, cheap.TransactionKey, got.TransactionKey, "the order of 5000 is %s on a charge of 1", got.Status)
	assert.Zero(t, st.Cancelled, "the order's real charge cancelled as another transaction")
}
