package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// An operator resets an ended order's workflow to its first workflow task
// (temporal workflow reset --type FirstWorkflowTask). The new run's Reserve
// finds the order as it ended, and the run ends it so again, without
// failing: nothing sent, no money or stock moved. Over a CANCELLED order a
// create sent again would be refused and the poll would find the
// transaction cancelled; over a FAILED order a late refund may since have
// marked the payment REFUNDED.
func TestResetToTheFirstTaskEndsTheOrderAsItEnded(t *testing.T) {
	t.Parallel()
	failing := testenv.QuietFaults()
	failing.Processing.SuccessRate = 0
	cases := []struct {
		name       string
		faults     simulator.Faults
		end        func(t *testing.T, s *testenv.Stack, tc client.Client, orderID string)
		want       status.Order
		stock      store.Stock
		successful int
	}{
		{"confirmed", testenv.QuietFaults(), func(t *testing.T, s *testenv.Stack, tc client.Client, orderID string) {
			require.NoError(t, workflowEnd(t, tc, workflows.PaymentWorkflowID(orderID), 60*time.Second))
		}, status.OrderConfirmed, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, 1},
		{"cancelled", testenv.Processing(time.Hour), func(t *testing.T, s *testenv.Stack, tc client.Client, orderID string) {
			waitOrder(t, s, orderID, status.OrderPending, 30*time.Second)
			require.NoError(t, tc.CancelWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), ""))
			_ = workflowEnd(t, tc, workflows.PaymentWorkflowID(orderID), 60*time.Second)
		}, status.OrderCancelled, store.Stock{ProductID: "P1", Total: 5, Available: 5}, 0},
		{"failed, payment refunded since", failing, func(t *testing.T, s *testenv.Stack, tc client.Client, orderID string) {
			require.NoError(t, workflowEnd(t, tc, workflows.PaymentWorkflowID(orderID), 60*time.Second))
			// As a refund of a late charge leaves it (RefundWorkflow's MarkPayment).
			require.NoError(t, s.Store.Advance(context.Background(), store.Change{OrderID: orderID, Payment: status.PaymentRefunded,
				Cause: "test: late charge refunded"}))
		}, status.OrderFailed, store.Stock{ProductID: "P1", Total: 5, Available: 5}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStack(t, c.faults, nil)
			setStock(t, s, "P1", 5)
			tc := testenv.Temporal(t)
			orderID := testenv.ID("reset")
			id := workflows.PaymentWorkflowID(orderID)
			placeOrder(t, s, orderID, "P1", 2)
			c.end(t, s, tc, orderID)
			before, err := s.Store.GetOrder(context.Background(), orderID)
			require.NoError(t, err)
			require.Equal(t, c.want, before.Status)

			resetToFirstTask(t, tc, id)
			runErr := workflowEnd(t, tc, id, 60*time.Second)
			o, err := s.Store.GetOrder(context.Background(), orderID)
			require.NoError(t, err)
			gw := s.Sim.Stats().Orders[orderID]
			t.Logf("reset run ended: %v; order %s payment %s; gateway %+v\nhistory:\n%s", runErr, o.Status, o.PaymentStatus, gw,
				historySummary(t, tc, id))
			assert.NoError(t, nonFailure(runErr), "the reset run must not fail")
			assert.Equal(t, c.want, o.Status)
			assert.Equal(t, before.PaymentStatus, o.PaymentStatus)
			assert.Equal(t, 1, gw.CreateRequests, "one create")
			assert.Equal(t, c.successful, gw.Successful)
			assert.Zero(t, gw.Refunded)
			assert.Equal(t, c.stock, stockOf(t, s, "P1"))
		})
	}
}

// resetToFirstTask resets the workflow to the end of its first workflow
// task, as `temporal workflow reset --type FirstWorkflowTask` does.
func resetToFirstTask(t *testing.T, tc client.Client, id string) {
	t.Helper()
	first := testenv.FirstEventID(t, id, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	require.NotZero(t, first, "no completed workflow task")
	_, err := tc.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{Namespace: "default",
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}, Reason: "test: reset to the first workflow task",
		WorkflowTaskFinishEventId: first, RequestId: testenv.ID("reset")})
	require.NoError(t, err)
}
