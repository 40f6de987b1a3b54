package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// The client against pgsim in the simulator's envelope: what it reads, and
// every class of the failure table, the status code deciding and the
// errorCode giving the detail.

var pgOrder = gateway.CreateRequest{OrderID: "order-pg-1", Amount: 5000, CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451",
	CallbackURL: "http://127.0.0.1:1/cb"}

func slowPgsim(t *testing.T) *simulator.Server {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	return testenv.Pgsim(t, f)
}

func requireCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ge *gateway.Error
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, status, ge.StatusCode, "%v", err)
	assert.Equal(t, code, ge.Code, "%v", err)
}

func TestClientReadsEveryAnswerOfPgsim(t *testing.T) {
	s := slowPgsim(t)
	c := client(t, s.GatewayURL())
	ctx := context.Background()
	created, err := c.CreatePayment(ctx, pgOrder, "u1", "")
	require.NoError(t, err)
	assert.Equal(t, gateway.Created{TransactionKey: created.TransactionKey, OrderID: pgOrder.OrderID, Status: gateway.StatusPending}, created)

	tx, err := c.Payment(ctx, created.TransactionKey)
	require.NoError(t, err)
	assert.Equal(t, gateway.Transaction{TransactionKey: created.TransactionKey, OrderID: pgOrder.OrderID, Amount: 5000, Status: gateway.StatusPending}, tx)

	list, err := c.PaymentsByOrder(ctx, pgOrder.OrderID)
	require.NoError(t, err)
	assert.Equal(t, gateway.OrderTransactions{OrderID: pgOrder.OrderID, Transactions: []gateway.Transaction{
		{TransactionKey: created.TransactionKey, OrderID: pgOrder.OrderID, Status: gateway.StatusPending}}}, list,
		"each line takes the answer's orderId; the document gives lines no amount")
	none, err := c.PaymentsByOrder(ctx, "order-none")
	require.NoError(t, err)
	assert.Empty(t, none.Transactions)

	cancelled, err := c.Cancel(ctx, created.TransactionKey)
	require.NoError(t, err)
	assert.Equal(t, gateway.StatusCancelled, cancelled.Status)
	assert.Equal(t, "CANCELLED", cancelled.Reason)

	keyed, err := c.CreatePayment(ctx, pgOrder, "u1", "key-pg")
	require.NoError(t, err)
	again, err := c.CreatePayment(ctx, pgOrder, "u1", "key-pg")
	require.NoError(t, err)
	assert.Equal(t, keyed.TransactionKey, again.TransactionKey)
}

func TestClientClassifiesPgsimFailures(t *testing.T) {
	s := slowPgsim(t)
	c := client(t, s.GatewayURL())
	ctx := context.Background()

	// Rejected: a 4xx, with the errorCode as detail.
	free := pgOrder
	free.Amount = 0
	_, err := c.CreatePayment(ctx, free, "u1", "")
	requireClass(t, err, gateway.ErrRejected)
	requireCode(t, err, 400, "BAD_REQUEST")
	// An orderId the gateway would refuse (under 6 characters) is never sent.
	short := pgOrder
	short.OrderID = "o1234"
	_, err = c.CreatePayment(ctx, short, "u1", "")
	requireClass(t, err, gateway.ErrInvalidRequest)
	visa := pgOrder
	visa.CardType = "VISA"
	_, err = c.CreatePayment(ctx, visa, "u1", "")
	requireClass(t, err, gateway.ErrRejected)
	requireCode(t, err, 400, "BAD_REQUEST")
	_, err = c.Payment(ctx, "20250101:TR:000000")
	requireClass(t, err, gateway.ErrRejected)
	requireCode(t, err, 404, "NOT_FOUND")
	assert.True(t, gateway.IsNotFound(err))
	_, err = c.CreatePayment(ctx, pgOrder, "u1", "key-reuse")
	require.NoError(t, err)
	other := pgOrder
	other.Amount = 9999
	_, err = c.CreatePayment(ctx, other, "u1", "key-reuse")
	requireClass(t, err, gateway.ErrRejected)
	requireCode(t, err, 422, "IDEMPOTENCY_KEY_REUSED")

	// Outcome unknown: INTERNAL_ERROR (the simulator's instability), any
	// 5xx, and an answer held past the read timeout.
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"failNext": 1}})
	_, err = c.CreatePayment(ctx, pgOrder, "u1", "")
	requireClass(t, err, gateway.ErrOutcomeUnknown)
	requireCode(t, err, 500, "INTERNAL_ERROR")
	testenv.PatchFaults(t, s, map[string]any{"lookup": map[string]any{"failNext": 1, "errorStatus": 503}})
	_, err = c.PaymentsByOrder(ctx, pgOrder.OrderID)
	requireClass(t, err, gateway.ErrOutcomeUnknown)
	requireCode(t, err, 503, "INTERNAL_ERROR")
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"timeoutRate": 1, "timeoutDelay": "2s"}})
	_, err = c.CreatePayment(ctx, pgOrder, "u1", "")
	requireClass(t, err, gateway.ErrOutcomeUnknown)
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"timeoutRate": 0}})

	// Unreachable: the port is closed.
	testenv.PatchFaults(t, s, map[string]any{"down": true})
	_, err = c.CreatePayment(ctx, pgOrder, "u1", "")
	requireClass(t, err, gateway.ErrUnreachable)
	_, err = c.Payment(ctx, "20250101:TR:000000")
	requireClass(t, err, gateway.ErrUnreachable)
}
