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

// The store leaves a refused re-send's payment UNKNOWN (attempts #1
// UNKNOWN, #2 REJECTED) for the workflow to search, then let the refusal
// decide. If that workflow is gone, RecoverWorkflow reads MaybeSent (the
// UNKNOWN #1) and the refusal (activities
// TestRecoveryReadsARefusalAfterAnUnknownCreate): its search lists nothing,
// so the order fails at once, as PaymentWorkflow's would, instead of
// holding the stock until its deadline and ending CANCELLED.
func TestRecoveryOfARefusedReSendFailsAfterAnEmptySearch(t *testing.T) {
	r := newRun(t)
	r.env.RegisterActivity(sw)
	r.env.OnActivity(sw.ReadRecoveryOrder, mock.Anything, mock.Anything).Return(activities.RecoveryOrder{Found: true,
		Order: store.Order{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: amount, UserID: "u1",
			Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		Keys: []string{}, MaybeSent: true, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(10 * time.Minute)}, nil)
	r.lookupReturns(nothingFound)
	r.settleTakes(0)
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(orderID)})
	r.env.ExecuteWorkflow(workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: orderID})
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	t.Logf("recovery ended %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups))
	assert.Equal(t, status.OrderFailed, st.Status, "the gateway refused the re-send and the search lists nothing")
	assert.Less(t, r.env.Now().Sub(r.start), time.Minute, "held the stock until the deadline")
}
