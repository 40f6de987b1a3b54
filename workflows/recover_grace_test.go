package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A recovery holds a refused re-send after an UNKNOWN create as
// PaymentWorkflow does: only a search made after the grace may let the
// refusal decide. The first create's SUCCESS, listed 1 s after the recovery
// starts and well within the deadline, confirms the order rather than
// being refunded as a late charge.
func TestRecoveryOfARefusedReSendWaitsTheGraceBeforeFailing(t *testing.T) {
	r := newRun(t)
	r.env.RegisterActivity(sw)
	r.env.OnActivity(sw.ReadRecoveryOrder, mock.Anything, mock.Anything).Return(activities.RecoveryOrder{Found: true,
		Order: store.Order{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: amount, UserID: "u1",
			Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		Keys: []string{}, MaybeSent: true, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(10 * time.Minute)}, nil)
	listedFrom := r.start.Add(time.Second)
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		if r.env.Now().Before(listedFrom) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	})
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(activities.CancelResult{}, nil).Maybe()
	r.settleTakes(0)
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(orderID)})
	r.env.ExecuteWorkflow(workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: orderID})
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	t.Logf("recovery ended %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, r.env.Now().Sub(r.start), len(r.lookups))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the recovery failed a refused re-send on a search made inside its grace; T1 listed SUCCESS within the deadline (lost order)")
}
