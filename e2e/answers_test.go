package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// How a payment's answer reaches its order: the gateway's callback, a poll
// when the callback is lost, a lookup by order id when the create's own
// answer is.

// The gateway's signed callback confirms the order; no lookup is needed.
func TestOrderConfirmedByARealCallback(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(200*time.Millisecond), func(c *service.Config) {
		c.PollInitial, c.PollMax = time.Minute, time.Minute // only the callback can answer in time
	})
	setStock(t, s, "P1", 5)
	v, _ := orderView(t, s, "order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", "cb-0001", "--wait", "--json")
	assert.Equal(t, status.OrderConfirmed, v.Status)
	assert.Equal(t, status.PaymentSuccess, v.PaymentStatus)
	assert.NotEmpty(t, v.TransactionKey)
	assert.Nil(t, v.LastLookup, "no lookup was needed")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
	assert.Contains(t, metrics(t, s), `payguard_callbacks_total{code="200"} 1`)
	assert.Equal(t, 1, s.Sim.Stats().Orders["cb-0001"].CreateRequests)
}

// With every callback lost, the poll finds the SUCCESS and confirms.
func TestOrderConfirmedByPollingWhenTheCallbackIsDropped(t *testing.T) {
	t.Parallel()
	f := testenv.Processing(100 * time.Millisecond)
	f.Callback.DropRate = 1
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	v, _ := orderView(t, s, "order", "--product", "P1", "--qty", "1", "--amount", "700", "--order-id", "poll-0001", "--wait", "--json")
	assert.Equal(t, status.OrderConfirmed, v.Status)
	require.NotNil(t, v.LastLookup)
	assert.Equal(t, gateway.StatusSuccess, v.LastLookup.Result)
	assert.NotContains(t, metrics(t, s), `payguard_callbacks_total{code="200"}`)
}

// A read timeout on create where the gateway did charge: the transaction is
// found by order id, exactly one exists, and the order is CONFIRMED.
func TestReadTimeoutButChargedIsFoundByOrderID(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Create.TimeoutRate, f.Create.TimeoutDelay = 1, simulator.Duration(30*time.Second)
	f.Processing = simulator.Processing{Min: simulator.Duration(300 * time.Millisecond), Max: simulator.Duration(300 * time.Millisecond), SuccessRate: 1}
	f.Callback.DropRate = 1 // so the answer must come from the lookup by order id
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rt-0001", "P1", 2)
	o := waitOrder(t, s, "rt-0001", status.OrderConfirmed, 30*time.Second)
	st := s.Sim.Stats().Orders["rt-0001"]
	assert.Equal(t, 1, st.CreateRequests)
	require.Len(t, st.Transactions, 1, "exactly one transaction")
	assert.Equal(t, st.Transactions[0], o.TransactionKey)
	events, err := s.Store.Events(context.Background(), "rt-0001")
	require.NoError(t, err)
	var found bool
	for _, e := range events {
		found = found || e.Cause == "transaction found by lookup"
	}
	assert.True(t, found, "the transaction was found by order id")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
}
