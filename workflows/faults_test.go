package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Faults inside a step: whatever fails after the stock is reserved, the
// workflow never fails; every path ends CONFIRMED, FAILED or CANCELLED.

// executeClean runs the workflow and requires that it did not fail.
func (r *run) executeClean(t *testing.T) workflows.State {
	t.Helper()
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError(), "after the stock is reserved the workflow never fails")
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	return st
}

func databaseDown() (activities.RequestResult, error) {
	return activities.RequestResult{}, errors.New("failed to connect to `host=127.0.0.1 user=postgres database=payguard`: connection refused")
}

// PostgreSQL is down for a while as the create starts: the activity fails
// before sending anything, again and again. The create waits for the
// database instead of failing the order.
func TestDatabaseDownWhileCreatingWaitsForIt(t *testing.T) {
	r := newRun(t)
	r.requestReturns(databaseDown, databaseDown, databaseDown, databaseDown, databaseDown, accepted(6))
	r.callbackAt(time.Minute, gateway.StatusSuccess, txKey)
	r.lookupReturns(found(gateway.StatusPending))
	st := r.executeClean(t)
	requireConfirmed(t, r, st)
	assert.Equal(t, 6, r.requests)
}

// A create failure of a type the workflow does not know (here the illegal
// move a retry once hit after its worker died) may have charged the card:
// the order is looked up by id, never failed.
func TestUnclassifiedCreateFailureIsAnUnknownOutcome(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrIllegalTransition, false, 2, ""))
	r.lookupReturns(found(gateway.StatusSuccess))
	st := r.executeClean(t)
	requireConfirmed(t, r, st)
	require.NotEmpty(t, r.lookups)
	assert.Empty(t, r.lookups[0].TransactionKey, "looked up by order id")
}

// Two live transactions; a FAILED callback for one of them must not fail the
// order while the other may still charge: the other succeeds and confirms.
func TestFailedAnswerForOneTransactionWaitsForTheOtherLiveOne(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	two := func(other, ours string) func(activities.LookupInput) (activities.LookupResult, error) {
		return func(activities.LookupInput) (activities.LookupResult, error) {
			return activities.LookupResult{Transactions: []gateway.Transaction{
				{TransactionKey: "other", OrderID: orderID, Amount: amount, Status: other},
				{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: ours},
			}}, nil
		}
	}
	r.lookupReturns(two(gateway.StatusPending, gateway.StatusPending), two(gateway.StatusFailed, gateway.StatusSuccess))
	r.callbackAt(7*time.Second, gateway.StatusFailed, "other")
	st := r.executeClean(t)
	requireConfirmed(t, r, st)
	for _, s := range r.settles {
		assert.NotEqual(t, store.ReleaseReservation, s.Reservation, "the stock was never released")
	}
}

// Both transactions fail: the order fails once nothing of it is live.
func TestFailedAnswersForEveryTransactionFailTheOrder(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	two := func(other, ours string) func(activities.LookupInput) (activities.LookupResult, error) {
		return func(activities.LookupInput) (activities.LookupResult, error) {
			return activities.LookupResult{Transactions: []gateway.Transaction{
				{TransactionKey: "other", OrderID: orderID, Amount: amount, Status: other, Reason: reasonFor(other)},
				{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: ours, Reason: reasonFor(ours)},
			}}, nil
		}
	}
	r.lookupReturns(two(gateway.StatusPending, gateway.StatusPending), two(gateway.StatusFailed, gateway.StatusFailed))
	r.callbackAt(7*time.Second, gateway.StatusFailed, "other")
	st := r.executeClean(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, store.ReleaseReservation, r.lastSettle(t).Reservation)
	assert.Empty(t, r.cancels, "nothing live to cancel")
}

// A callback that arrives while compensation runs must not move the order
// out of CANCELLED (the query and the search attributes included).
func TestFinalStatusNeverMovesAfterCompensation(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	r.lookupReturns(breakerOpen)
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).After(5*time.Second).Return(activities.CancelResult{}, nil)
	r.callbackAt(order.Deadline+2*time.Second, gateway.StatusPending, "late")
	st := r.executeClean(t)
	assert.Equal(t, status.OrderCancelled, st.Status)
	assert.Equal(t, status.OrderCancelled, r.queryState(t).Status)
	for _, s := range r.settles {
		assert.NotEqual(t, status.PaymentPending, s.Payment, "no status move after the order ended: %+v", s)
	}
}

// The creates of an order are counted in the database: the create activity
// reports three recorded (its earlier runs timed out), so with
// --request-attempts 3 nothing is re-sent however long the gateway knows
// nothing.
func TestCreateAttemptsAreCountedFromTheDatabase(t *testing.T) {
	r := newTunedRun(t, func(tu *workflows.Tuning) { tu.RequestAttempts = 3 })
	r.requestReturns(func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("read timeout", activities.ErrGatewayOutcomeUnknown,
			errors.New("read timeout"), activities.RequestFailure{Attempt: 1, Attempts: 3})
	})
	r.lookupReturns(nothingFound)
	r.cancelsSucceed(0)
	st := r.executeClean(t)
	assert.Equal(t, 1, r.requests, "no re-send beyond --request-attempts")
	assert.Equal(t, 3, st.Attempts)
	assert.Equal(t, status.OrderCancelled, st.Status)
}
