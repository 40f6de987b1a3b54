package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// A sweep reads a page of orders, then looks at each one's workflow in
// turn, pacing its gateway lookups: an order open in the page can be ended
// by its own workflow before the sweep looks. A recovery started over an
// order just CONFIRMED would become the order's latest run, without its
// OrderStatus (invariant I4).

// latestRun describes the newest run under the order's workflow id: its
// type and its OrderStatus and PaymentStatus search attributes.
func latestRun(t *testing.T, orderID string) (workflowType, orderStatus, paymentStatus string) {
	t.Helper()
	d, err := testenv.Temporal(t).DescribeWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), "")
	require.NoError(t, err)
	sa := d.TypedSearchAttributes
	orderStatus, _ = sa.GetKeyword(workflows.OrderStatusKey)
	paymentStatus, _ = sa.GetKeyword(workflows.PaymentStatusKey)
	return d.RawResponse.GetWorkflowExecutionInfo().GetType().GetName(), orderStatus, paymentStatus
}

// endByCallback has the gateway decide the pending order's transaction
// (gatewayStatus) and call back, and waits until the order is want in the
// database and its workflow has closed.
func endByCallback(t *testing.T, s *testenv.Stack, pending store.Order, gatewayStatus string, want status.Order) store.Order {
	t.Helper()
	testenv.Resolve(t, s.Sim, pending.TransactionKey, gatewayStatus, "", true)
	o := waitOrder(t, s, pending.OrderID, want, 30*time.Second)
	testenv.Eventually(t, 10*time.Second, func() bool { return !workflowOpen(t, pending.OrderID) }, pending.OrderID+"'s workflow closed")
	return o
}

// An order that its workflow ends between the sweep's page and its look is
// left alone: no recovery starts over it, and its own run stays the latest.
func TestReconcileLeavesAnOrderItsWorkflowEndedUnderTheSweep(t *testing.T) {
	// One lookup a second (the least allowed): the final orders ahead of
	// the open one in the page hold the sweep ~7 s before it looks at it.
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.ReconcileRate = 1 })
	ctx := context.Background()
	setStock(t, s, "P1", 10)
	const ahead = 8
	for i := range ahead {
		id := fmt.Sprintf("race-%d", i)
		placeOrder(t, s, id, "P1", 1)
		endByCallback(t, s, waitOrder(t, s, id, status.OrderPending, 30*time.Second), "SUCCESS", status.OrderConfirmed)
	}
	placeOrder(t, s, "race-open", "P1", 1)
	open := waitOrder(t, s, "race-open", status.OrderPending, 30*time.Second)

	c := testenv.Temporal(t)
	sweepID := testenv.ID("sweep")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sweepID, TaskQueue: s.TaskQueue},
		workflows.ReconcileWorkflowName, workflows.ReconcileInput{})
	require.NoError(t, err)
	// The batch's first heartbeat comes after its page is read.
	testenv.Eventually(t, 30*time.Second, func() bool {
		d, err := c.DescribeWorkflow(ctx, sweepID, "")
		require.NoError(t, err)
		for _, pa := range d.RawResponse.GetPendingActivities() {
			if pa.GetActivityType().GetName() == "SweepBatch" && pa.GetHeartbeatDetails() != nil {
				return true
			}
		}
		return false
	}, "the sweep read its page")

	// The open order ends CONFIRMED while the sweep paces its lookups.
	endByCallback(t, s, open, "SUCCESS", status.OrderConfirmed)

	var res workflows.ReconcileResult
	require.NoError(t, run.Get(ctx, &res))
	assert.Equal(t, ahead+1, res.Checked)
	for _, f := range res.Findings {
		assert.NotEqual(t, "race-open", f.OrderID, "finding over an order its workflow ended: %+v", f)
	}
	typ, orderStatus, paymentStatus := latestRun(t, "race-open")
	assert.Equal(t, workflows.PaymentWorkflowName, typ, "the order's latest run is its own workflow, not a recovery")
	assert.Equal(t, string(status.OrderConfirmed), orderStatus)
	assert.Equal(t, string(status.PaymentSuccess), paymentStatus)
	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
}

// A recovery that finds its order already final (two sweeps each started
// one, the second after the first ended the order) changes nothing, and
// leaves the order's statuses on its run, the latest, as the database has
// them.
func TestRecoveryOfAFinalOrderPublishesItsStatus(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	for _, tc := range []struct {
		id       string
		resolved string
		want     status.Order
		payment  status.Payment
	}{
		{"final-ok", "SUCCESS", status.OrderConfirmed, status.PaymentSuccess},
		{"final-failed", "FAILED", status.OrderFailed, status.PaymentFailed},
	} {
		placeOrder(t, s, tc.id, "P1", 1)
		before := endByCallback(t, s, waitOrder(t, s, tc.id, status.OrderPending, 30*time.Second), tc.resolved, tc.want)

		run, err := testenv.Temporal(t).ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.PaymentWorkflowID(tc.id), TaskQueue: s.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: tc.id})
		require.NoError(t, err)
		var st workflows.State
		require.NoError(t, run.Get(ctx, &st))
		assert.Equal(t, tc.want, st.Status)

		typ, orderStatus, paymentStatus := latestRun(t, tc.id)
		assert.Equal(t, workflows.RecoverWorkflowName, typ)
		assert.Equal(t, string(tc.want), orderStatus, fmt.Sprintf("%s: the recovery's run shows the order's status", tc.id))
		assert.Equal(t, string(tc.payment), paymentStatus)
		after, err := s.Store.GetOrder(ctx, tc.id)
		require.NoError(t, err)
		assert.Equal(t, before.Status, after.Status, "the recovery changed nothing")
		assert.Equal(t, before.PaymentStatus, after.PaymentStatus)
		assert.Equal(t, 1, s.Sim.Stats().Orders[tc.id].CreateRequests, "a recovery never creates")
	}
}
