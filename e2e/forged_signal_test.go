package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Issue 29's reproduction: a client of the namespace without the codec key
// or the gateway's secret signals a plaintext SUCCESS for a key the gateway
// never issued. It confirms nothing, sells no stock, cancels nothing at the
// gateway; it is recorded as an anomaly, and the order goes on to the
// gateway's own answer.
func TestAForgedCallbackSignalConfirmsNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(8*time.Second), nil)
	setStock(t, s, "P1", 5)
	id := testenv.ID("forged-signal")
	placeOrder(t, s, id, "P1", 2)
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)

	forged := gateway.Transaction{TransactionKey: "FORGED:TR:000000", OrderID: id, Amount: o.Amount, Status: gateway.StatusSuccess}
	require.NoError(t, testenv.RawTemporal(t).SignalWorkflow(t.Context(), workflows.PaymentWorkflowID(id), "", workflows.CallbackSignal, forged))
	testenv.Eventually(t, 15*time.Second, func() bool {
		return assert.ObjectsAreEqual([]string{"callback signal ignored: the gateway did not sign it"}, anomalies(t, s.Store, id))
	}, "the forged signal recorded as an anomaly")
	got, err := s.Store.GetOrder(t.Context(), id)
	require.NoError(t, err)
	require.NotEqual(t, status.OrderConfirmed, got.Status, "not confirmed by the forgery")

	final := waitOrder(t, s, id, status.OrderConfirmed, 30*time.Second) // pgsim's own answer, after 8 s
	assert.Equal(t, o.TransactionKey, final.TransactionKey, "confirmed on the gateway's transaction")
	gw := s.Sim.Stats().Orders[id]
	assert.Equal(t, 1, gw.Successful, "the real transaction charged, not cancelled as another")
	assert.Zero(t, gw.Cancelled)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
}
