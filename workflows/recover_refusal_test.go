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

// recovering stubs what a recovery reads of its order — rec, with the
// order's id, product P1, quantity 2, the amount and user u1 filled in —
// and lets its cancels (recorded) and its settle through.
func (r *run) recovering(rec activities.RecoveryOrder) {
	rec.Found = true
	o := &rec.Order
	o.OrderID, o.ProductID, o.Quantity, o.Amount, o.UserID = orderID, "P1", 2, amount, "u1"
	r.env.RegisterActivity(sw)
	r.env.OnActivity(sw.ReadRecoveryOrder, mock.Anything, mock.Anything).Return(rec, nil)
	r.cancelsMaybe()
	r.settleTakes(0)
}

// successListedFrom answers a search with nothing before at, and with the
// first create's SUCCESS from then on: a transaction the gateway lists late.
func (r *run) successListedFrom(at time.Time) func(activities.LookupInput) (activities.LookupResult, error) {
	return func(in activities.LookupInput) (activities.LookupResult, error) {
		if r.env.Now().Before(at) {
			return nothingFound(in)
		}
		return found(gateway.StatusSuccess)(in)
	}
}

// refusedReSendRecovery is a run of RecoverWorkflow on an order whose
// workflow is gone after a refused re-send (attempts #1 UNKNOWN, #2
// REJECTED): the store left its payment UNKNOWN and the recovery reads
// MaybeSent and the refusal (activities
// TestRecoveryReadsARefusalAfterAnUnknownCreate). The test sets the lookups.
func refusedReSendRecovery(t *testing.T) *run {
	r := newRun(t)
	r.recovering(activities.RecoveryOrder{Order: store.Order{Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		Keys: []string{}, MaybeSent: true, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(10 * time.Minute)})
	return r
}

// recoverOrder runs the recovery to its end: its state, and how long it took.
func (r *run) recoverOrder(t *testing.T) (workflows.State, time.Duration) {
	t.Helper()
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(orderID)})
	r.env.ExecuteWorkflow(workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: orderID})
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	took := r.env.Now().Sub(r.start)
	t.Logf("recovery ended %s/%s after %s, %d lookups", st.Status, st.PaymentStatus, took, len(r.lookups))
	return st, took
}

// The search lists nothing: the order fails as PaymentWorkflow's would,
// rather than holding the stock until its deadline and ending CANCELLED.
func TestRecoveryOfARefusedReSendFailsAfterAnEmptySearch(t *testing.T) {
	r := refusedReSendRecovery(t)
	r.lookupReturns(nothingFound)
	st, took := r.recoverOrder(t)
	assert.Equal(t, status.OrderFailed, st.Status, "the gateway refused the re-send and the search lists nothing")
	assert.Less(t, took, time.Minute, "held the stock until the deadline")
}

// Searches refused by the open lookup breaker hold the refusal; the first
// search that can be made decides it, not the deadline.
func TestRecoveryOfARefusedReSendFailsAfterAnEmptySearchOnceLookupsReturn(t *testing.T) {
	r := refusedReSendRecovery(t)
	r.lookupReturns(breakerOpen, nothingFound)
	st, took := r.recoverOrder(t)
	assert.Equal(t, status.OrderFailed, st.Status, "the gateway refused the re-send and the searches list nothing")
	assert.Less(t, took, time.Minute, "held the stock until the deadline")
}

// Only a search made after the grace may let the refusal decide: the first
// create's SUCCESS, listed 1 s after the recovery starts and well within the
// deadline, confirms the order rather than being refunded as a late charge.
func TestRecoveryOfARefusedReSendWaitsTheGraceBeforeFailing(t *testing.T) {
	r := refusedReSendRecovery(t)
	r.lookupReturns(r.successListedFrom(r.start.Add(time.Second)))
	st, _ := r.recoverOrder(t)
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"a refused re-send failed on a search made inside its grace; T1 was listed SUCCESS within the deadline (lost order)")
}
