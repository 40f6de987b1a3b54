package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// The sweep (docs/design.md §10) refunds a late charge once: over an order
// whose workflow died with its payment refused, and under two sweeps at
// once.

// An order whose workflow died after its granted re-send was refused: the
// store holds the payment UNKNOWN (a refused re-send proves nothing of the
// first create, whose outcome was unknown) and the order still PENDING. The
// first create did reach the gateway after all and was charged, its callback
// lost. The recovery's search finds that charge and confirms the order on
// it: the sale is kept, nothing refunded, the stock sold.
func TestReconcileRecoveryOfRefusedPaymentWithLateCharge(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	const orderID = "rc-refused"
	setStock(t, s, "P1", 5)
	_, err := s.Store.Reserve(ctx, store.NewOrder{OrderID: orderID, ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "user-1"})
	require.NoError(t, err)

	// Create #1 reaches the gateway, but its answer is lost: UNKNOWN.
	lost := "http://" + testenv.FreeAddr(t) + "/lost"
	begun, err := s.Store.BeginAttempt(ctx, store.AttemptRequest{OrderID: orderID, CallbackURL: lost, Limit: 3})
	require.NoError(t, err)
	require.True(t, begun.Send)
	g, err := gateway.New(gateway.Config{BaseURL: s.Sim.GatewayURL(), UserID: "user-1"})
	require.NoError(t, err)
	defer g.Close()
	first, err := g.CreatePayment(ctx, gateway.CreateRequest{OrderID: orderID, Amount: 5000, CardType: "SAMSUNG",
		CardNo: "1234-5678-9814-1451", CallbackURL: lost}, "user-1", "")
	require.NoError(t, err)
	require.NoError(t, s.Store.FinishAttempt(ctx, store.Answer{OrderID: orderID, No: begun.Attempt.No,
		Outcome: store.OutcomeUnknown, Detail: "read timeout"}))
	// Create #2, granted after a lookup found nothing, is refused.
	begun, err = s.Store.BeginAttempt(ctx, store.AttemptRequest{OrderID: orderID, CallbackURL: lost, Grant: "resend-1", Limit: 3})
	require.NoError(t, err)
	require.True(t, begun.Send)
	require.NoError(t, s.Store.FinishAttempt(ctx, store.Answer{OrderID: orderID, No: begun.Attempt.No,
		Outcome: store.OutcomeRejected, Reason: "LIMIT_EXCEEDED", Detail: "400"}))
	o, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	require.Equal(t, status.OrderPending, o.Status)
	require.Equal(t, status.PaymentUnknown, o.PaymentStatus, "a refused re-send after an unknown create fails nothing yet")
	// The workflow died here, before its search. Create #1 charges.
	testenv.Resolve(t, s.Sim, first.TransactionKey, "SUCCESS", "", false)

	f := onlyFinding(t, sweep(t, s))
	require.Equal(t, activities.FindingWorkflowGone, f.Finding)
	require.Equal(t, workflows.ResultStarted, f.Result)

	// The recovery ends the order on the charge: money and stock matching.
	testenv.Eventually(t, 30*time.Second, func() bool { return !workflowOpen(t, orderID) }, "the recovery ended")
	d, err := testenv.Temporal(t).DescribeWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.RawResponse.GetWorkflowExecutionInfo().GetStatus(), "the recovery never fails")
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, got.Status)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus)
	assert.Equal(t, first.TransactionKey, got.TransactionKey)
	assert.Equal(t, store.ReservationCommitted, got.Reservation)
	assert.Equal(t, int64(4), stockOf(t, s, "P1").Available)
	assert.Equal(t, gateway.StatusSuccess, gatewayTx(t, s, first.TransactionKey).Status, "the charge kept")
	assert.Zero(t, s.Sim.Stats().Orders[orderID].Refunded)
	assert.Equal(t, 1, s.Sim.Stats().Orders[orderID].CreateRequests, "a recovery never creates")

	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
}

// Two sweeps at once (the schedule's and `starter reconcile`) over one late
// SUCCESS start one refund between them: RefundWorkflow's id rule, not luck.
// Counted in the order's event log, where each refund run records itself.
func TestReconcileConcurrentSweepsRefundOnce(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	o := cancelledWithLateCharge(t, s, "rc-twice")

	results := make(chan workflows.ReconcileResult, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			out, err := starter(ctx, s, "reconcile", "--json")
			var res workflows.ReconcileResult
			if err == nil {
				err = json.Unmarshal([]byte(out), &res)
			}
			results <- res
			errs <- err
		}()
	}
	started := 0
	for range 2 {
		require.NoError(t, <-errs)
		for _, f := range (<-results).Findings {
			if f.Result == workflows.ResultStarted {
				started++
			}
		}
	}
	assert.LessOrEqual(t, started, 1, "one refund started between the two sweeps")
	testenv.Eventually(t, 30*time.Second, func() bool {
		got, err := s.Store.GetOrder(ctx, "rc-twice")
		return err == nil && got.PaymentStatus == status.PaymentRefunded
	}, "payment REFUNDED")
	events, err := s.Store.Events(ctx, "rc-twice")
	require.NoError(t, err)
	refunds := 0
	for _, e := range events {
		if e.Kind == store.KindAnomaly && strings.HasPrefix(e.Cause, "late charge refunded") {
			refunds++
		}
	}
	assert.Equal(t, 1, refunds, "refunded once")
	assert.Equal(t, gateway.StatusCancelled, gatewayTx(t, s, o.TransactionKey).Status)
	assert.Empty(t, sweep(t, s).Findings, "a third sweep finds nothing")
}
