package httpapi_test

// Holes a review of the customer's refund found, each held shut on the
// real stack (PostgreSQL, the Temporal dev server, pgsim).

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// confirmedOrder places an order through the API and waits for CONFIRMED.
func confirmedOrder(t *testing.T, s *testenv.Stack, c *client, id string) store.Order {
	t.Helper()
	require.Equal(t, http.StatusCreated, c.do(http.MethodPost, "/api/v1/orders", order(id, "P1", 3, 900), customer, true).code)
	return s.WaitOrder(t, id, status.OrderConfirmed, 30*time.Second)
}

// gatewayTx is the transaction as pgsim holds it (its lookup).
func gatewayTx(t *testing.T, s *testenv.Stack, key string) gateway.Transaction {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.Sim.GatewayURL()+"/api/v1/payments/"+key, nil)
	require.NoError(t, err)
	req.Header.Set("X-USER-ID", "user-1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var env struct {
		Data gateway.TransactionInfo `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
	return env.Data.Transaction()
}

// refundDone waits for the order's refund workflow to end; its error.
func refundDone(t *testing.T, orderID, key string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return testenv.RawTemporal(t).GetWorkflow(ctx, workflows.RefundWorkflowID(orderID, key), "").Get(ctx, nil)
}

// refundHeldBeforeItsRecord asks for the order's refund with its
// reservation row held, and returns once the gateway has refunded the
// charge and the refund's record waits on the row; release lets it go on.
func refundHeldBeforeItsRecord(t *testing.T, s *testenv.Stack, c *client, o store.Order) (release func()) {
	t.Helper()
	release = testenv.HoldRows(t, s.Store.Pool(), `SELECT 1 FROM reservations WHERE order_id = $1 FOR UPDATE`, o.OrderID)
	r := c.do(http.MethodPost, "/api/v1/orders/"+o.OrderID+"/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, r.code, "%s", r.body)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders[o.OrderID].Refunded == 1 }, "the gateway refunded the charge")
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "the refund's record waiting on the reservation")
	return release
}

// booksUnchanged asserts the order still holds its charge and its stock.
func booksUnchanged(t *testing.T, s *testenv.Stack, orderID string) {
	t.Helper()
	o, err := s.Store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus, "the payment as it was")
	assert.Equal(t, store.ReservationCommitted, o.Reservation, "the stock as it was")
	assert.Equal(t, int64(3), s.Stock(t, "P1").Sold)
}

// A cancel answered 404 is no word that the charge is gone (a proxy, a
// route, a fault): for the order's own charge it is retried, and the
// refund completes once, books and gateway agreeing.
func TestARefundWhoseCancelIsAnswered404IsRetried(t *testing.T) {
	s, _, c := apiStack(t, 200*time.Millisecond, nil)
	s.SetStock(t, "P1", 10)
	o := confirmedOrder(t, s, c, "rv404-0001")

	testenv.PatchFaults(t, s.Sim, map[string]any{"cancel": map[string]any{"failNext": 1, "errorStatus": 404}})
	r := c.do(http.MethodPost, "/api/v1/orders/rv404-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, r.code, "%s", r.body)
	require.NoError(t, refundDone(t, o.OrderID, o.TransactionKey))
	after, err := s.Store.GetOrder(context.Background(), o.OrderID)
	require.NoError(t, err)
	assert.Equal(t, status.PaymentRefunded, after.PaymentStatus)
	assert.Equal(t, store.ReservationReturned, after.Reservation)
	assert.Equal(t, "REFUNDED", gatewayTx(t, s, o.TransactionKey).Reason)
	assert.Equal(t, 1, s.Sim.Stats().Orders[o.OrderID].Refunded, "refunded once")
}

// A charge the gateway holds FAILED cannot be refunded: nothing refunded,
// nothing recorded.
func TestARefundOfAChargeTheGatewayHoldsFailedChangesNoBooks(t *testing.T) {
	s, _, c := apiStack(t, 200*time.Millisecond, nil)
	s.SetStock(t, "P1", 10)
	o := confirmedOrder(t, s, c, "rvfail-0001")
	testenv.Resolve(t, s.Sim, o.TransactionKey, gateway.StatusFailed, "", false)

	r := c.do(http.MethodPost, "/api/v1/orders/rvfail-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, r.code, "%s", r.body)
	require.Error(t, refundDone(t, o.OrderID, o.TransactionKey))
	booksUnchanged(t, s, o.OrderID)
	var refunds int
	require.NoError(t, s.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM refunds WHERE order_id = $1`, o.OrderID).Scan(&refunds))
	assert.Zero(t, refunds)
}

// Between the gateway's cancel and the record of it, the sweep leaves the
// order to its refund; after it, the sweep and chaos's invariants take the
// refund as right.
func TestASweepLeavesARefundInProgressAlone(t *testing.T) {
	s, _, c := apiStack(t, 200*time.Millisecond, nil)
	s.SetStock(t, "P1", 10)
	o := confirmedOrder(t, s, c, "rvwin-0001")

	release := refundHeldBeforeItsRecord(t, s, c, o)
	var out bytes.Buffer
	require.NoError(t, cli.Run(context.Background(), []string{"reconcile", "--json"}, cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &out}), out.String())
	assert.NotContains(t, out.String(), "confirmed_unpaid", "a refund in progress is not a finding")
	release()
	require.NoError(t, refundDone(t, o.OrderID, o.TransactionKey))

	after, err := s.Store.GetOrder(context.Background(), o.OrderID)
	require.NoError(t, err)
	require.Equal(t, status.PaymentRefunded, after.PaymentStatus)
	tx := gatewayTx(t, s, o.TransactionKey)
	out.Reset()
	require.NoError(t, cli.Run(context.Background(), []string{"reconcile", "--json"}, cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &out}), out.String())
	assert.NotContains(t, out.String(), "confirmed_unpaid", "nor the refund done")
	outs, err := s.Store.Outcomes(context.Background(), []string{o.OrderID})
	require.NoError(t, err)
	books := check.Books{
		Launched: []string{o.OrderID},
		Orders:   map[string]store.Order{o.OrderID: after},
		Products: map[string]store.Stock{"P1": s.Stock(t, "P1")},
		Gateway:  map[string]check.GatewayOrder{o.OrderID: {CreateRequests: 1, Transactions: []gateway.Transaction{tx}}},
		Workflows: map[string]check.Workflow{o.OrderID: {Status: check.WorkflowCompleted, Result: status.OrderConfirmed,
			SearchStatus: string(status.OrderConfirmed)}},
		Outcomes: map[string]store.Outcome{o.OrderID: outs[0]},
	}
	for _, res := range check.Run(books) {
		assert.Zero(t, res.Violations, "%s (%s) on a customer refund done right: %v", res.ID, res.Rule, res.Examples)
	}
}

// A refund ended before its record (terminated) runs again on the next
// request, and records what the gateway did.
func TestARefundEndedBeforeItsRecordRunsAgain(t *testing.T) {
	s, _, c := apiStack(t, 200*time.Millisecond, nil)
	s.SetStock(t, "P1", 10)
	o := confirmedOrder(t, s, c, "rvterm-0001")
	release := refundHeldBeforeItsRecord(t, s, c, o)
	require.NoError(t, testenv.RawTemporal(t).TerminateWorkflow(context.Background(),
		workflows.RefundWorkflowID(o.OrderID, o.TransactionKey), "", "operator terminated a stuck refund"))
	release()

	again := c.do(http.MethodPost, "/api/v1/orders/rvterm-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, again.code, "%s", again.body)
	testenv.Eventually(t, 30*time.Second, func() bool {
		after, err := s.Store.GetOrder(context.Background(), o.OrderID)
		return err == nil && after.PaymentStatus == status.PaymentRefunded && after.Reservation == store.ReservationReturned
	}, "recorded by the refund run again")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 10}, s.Stock(t, "P1"), "returned once")
	assert.Equal(t, 1, s.Sim.Stats().Orders[o.OrderID].Refunded, "refunded once at the gateway")
}
