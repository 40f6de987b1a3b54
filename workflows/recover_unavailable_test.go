package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A recovered refused re-send whose first searches are refused by the open
// lookup breaker is failed by the first search that can be made, not held
// to its deadline and cancelled.
func TestRecoveryOfARefusedReSendFailsAfterAnEmptySearchOnceLookupsReturn(t *testing.T) {
	r := newRun(t)
	r.env.RegisterActivity(sw)
	r.env.OnActivity(sw.ReadRecoveryOrder, mock.Anything, mock.Anything).Return(activities.RecoveryOrder{Found: true,
		Order: store.Order{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: amount, UserID: "u1",
			Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		Keys: []string{}, MaybeSent: true, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(10 * time.Minute)}, nil)
	r.lookupReturns(breakerOpen, nothingFound)
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	r.settleTakes(0)
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(orderID)})
	r.env.ExecuteWorkflow(workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: orderID})
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	t.Logf("recovery ended %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups))
	assert.Equal(t, status.OrderFailed, st.Status, "the gateway refused the re-send and the searches list nothing")
	assert.Less(t, r.env.Now().Sub(r.start), time.Minute, "held the stock until the deadline")
}
