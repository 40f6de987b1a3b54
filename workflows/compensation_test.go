package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// The payment workflow when the answer is late, missing or more than one:
// an open breaker, deadlines, cancels, compensation and second charges.

func TestBreakerOpenForSeveralPollsThenSuccess(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(breakerOpen, breakerOpen, breakerOpen, found(gateway.StatusSuccess))
	var during []workflows.State
	for _, at := range []time.Duration{6 * time.Second, 16 * time.Second, 36 * time.Second} {
		r.env.RegisterDelayedCallback(func() { during = append(during, r.queryState(t)) }, at)
	}
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Len(t, during, 3)
	for _, s := range during {
		assert.Equal(t, status.OrderPending, s.Status, "lookup unavailable is not payment failed")
		assert.Equal(t, status.PaymentPending, s.PaymentStatus)
		assert.Equal(t, "UNAVAILABLE", s.LastLookup.Result)
	}
	for _, s := range r.settles {
		assert.NotEqual(t, store.ReleaseReservation, s.Reservation, "the stock was held all along")
	}
	assert.Len(t, r.lookups, 4)
}

func TestDeadlineWithBreakerOpenCancelsAndReleases(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(breakerOpen)
	r.cancelsSucceed(0)
	st := r.execute(t)
	assert.Equal(t, status.OrderCancelled, st.Status)
	assert.Equal(t, status.PaymentCancelled, st.PaymentStatus)
	require.Len(t, r.cancels, 1)
	assert.Equal(t, []string{txKey}, r.cancels[0].TransactionKeys)
	assert.Equal(t, order.UserID, r.cancels[0].UserID)
	require.Len(t, r.orderEnd, 1)
	assert.Equal(t, "deadline passed without a definitive answer", r.orderEnd[0].Cause)
	assert.Equal(t, "UNAVAILABLE", st.LastLookup.Result, "one last lookup was tried")
}

func TestDeadlineButLastLookupSaysSuccess(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	var n int
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).Return(func(context.Context, activities.LookupInput) (activities.LookupResult, error) {
		n++
		// Open until the deadline has passed (the last lookup comes after 10 min).
		if r.env.Now().Sub(r.start) < order.Deadline {
			return breakerOpen(activities.LookupInput{})
		}
		return found(gateway.StatusSuccess)(activities.LookupInput{})
	})
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Greater(t, n, 3)
}

func TestCancelFailingTwiceThenAcknowledged(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(found(gateway.StatusPending))
	var tries int
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(func(context.Context, activities.CancelInput) (activities.CancelResult, error) {
		tries++
		if tries <= 2 {
			return activities.CancelResult{}, temporal.NewApplicationError("gateway down", "CancelFailed")
		}
		return activities.CancelResult{Transactions: []gateway.Transaction{{TransactionKey: txKey, OrderID: orderID, Status: gateway.StatusCancelled}}}, nil
	})
	st := r.execute(t)
	assert.Equal(t, 3, tries)
	assert.Equal(t, status.OrderCancelled, st.Status)
	require.Len(t, r.orderEnd, 1)
}

func TestOperatorCancelMidWaitCompensates(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(found(gateway.StatusPending))
	r.cancelsSucceed(0)
	r.env.RegisterDelayedCallback(func() { r.env.CancelWorkflow() }, 30*time.Second)
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, r.env.GetWorkflowError(), &canceled)
	require.Len(t, r.cancels, 1)
	assert.Equal(t, []string{txKey}, r.cancels[0].TransactionKeys)
	require.Len(t, r.orderEnd, 1)
	assert.Equal(t, store.CauseOperatorCancel, r.orderEnd[0].Cause, "the cause store.Outcomes knows an operator's cancel by")
	assert.Equal(t, status.OrderCancelled, r.queryState(t).Status)
}

// A SUCCESS for another transaction that lands while the order is being
// confirmed is a second charge: it is refunded before the workflow ends.
func TestSecondChargeArrivingDuringSettlementIsRefunded(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.cancelsSucceed(1)
	r.settleTakes(2 * time.Second)
	r.callbackAt(time.Second, gateway.StatusSuccess, txKey)
	// Arrives while Settle (2 s) is running.
	r.callbackAt(2*time.Second, gateway.StatusSuccess, "20261130:TR:000002")
	st := r.execute(t)
	assert.Equal(t, status.OrderConfirmed, st.Status)
	assert.Equal(t, status.PaymentSuccess, st.PaymentStatus, "the order keeps its own charge")
	require.Len(t, r.cancels, 1)
	assert.Equal(t, []string{"20261130:TR:000002"}, r.cancels[0].TransactionKeys)
	assert.Contains(t, r.anomalies(), "SUCCESS arrived after the order was settled CONFIRMED; refunding")
}

// An operator's cancel while the create is on the wire: the workflow waits
// for the create to end, then cancels whatever the gateway holds.
func TestOperatorCancelDuringTheCreateLooksForWhatWasSent(t *testing.T) {
	r := newRun(t)
	r.env.OnActivity(a.RequestPayment, mock.Anything, mock.Anything).After(3*time.Second).Return(activities.RequestResult{TransactionKey: txKey, Attempt: 1}, nil)
	r.cancelsSucceed(0)
	r.env.RegisterDelayedCallback(func() { r.env.CancelWorkflow() }, time.Second)
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, r.env.GetWorkflowError(), &canceled)
	require.Len(t, r.cancels, 1)
	assert.True(t, r.cancels[0].SearchByOrder, "the create may have reached the gateway: search by order id")
	require.Len(t, r.orderEnd, 1)
	assert.Equal(t, status.OrderCancelled, r.queryState(t).Status)
}

// The run's view is older than the database's: it knew of no
// create, and CancelOrder found one that may have reached the gateway. The
// compensation searches the gateway by order id, then cancels the order
// again, saying it searched.
func TestCompensationThatFindsAnUnseenCreateSearchesTheGateway(t *testing.T) {
	r := newRun(t)
	r.reserveFinds(store.Order{OrderID: order.OrderID, Status: status.OrderRequesting}, false)
	r.cancelOrderFirst = []error{temporal.NewNonRetryableApplicationError("a create of the order may have reached the gateway",
		activities.ErrGatewayNotSearched, nil)}
	r.cancelsSucceed(1)
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, r.env.GetWorkflowError(), &canceled)
	assert.Equal(t, 0, r.requests, "nothing sent")
	require.Len(t, r.cancels, 1)
	assert.True(t, r.cancels[0].SearchByOrder, "the gateway searched by order id")
	require.Len(t, r.orderEnd, 2)
	assert.True(t, r.orderEnd[0].Unsearched, "the first CancelOrder says it did not search")
	assert.Equal(t, status.Payment(""), r.orderEnd[0].Payment)
	assert.False(t, r.orderEnd[1].Unsearched)
	assert.Equal(t, status.PaymentRefunded, r.orderEnd[1].Payment, "the charge found was refunded")
	st := r.queryState(t)
	assert.Equal(t, status.OrderCancelled, st.Status)
	assert.Equal(t, status.PaymentRefunded, st.PaymentStatus)
}

// CancelOrder refused past maxCancelSearches (which only a bug could do):
// the compensation keeps searching, spaced out, and ends the order
// CANCELLED; the workflow never fails with the stock held.
func TestCompensationRefusedManyTimesKeepsSearchingAndEnds(t *testing.T) {
	r := newRun(t)
	r.reserveFinds(store.Order{OrderID: order.OrderID, Status: status.OrderRequesting}, false)
	refused := temporal.NewNonRetryableApplicationError("a create of the order may have reached the gateway",
		activities.ErrGatewayNotSearched, nil)
	for range 13 {
		r.cancelOrderFirst = append(r.cancelOrderFirst, refused)
	}
	r.cancelsSucceed(0)
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, r.env.GetWorkflowError(), &canceled, "ended cancelled, not failed")
	assert.Len(t, r.cancels, 13, "a search after each refusal")
	require.Len(t, r.orderEnd, 14)
	assert.GreaterOrEqual(t, r.endedAt[13].Sub(r.endedAt[10]), 3*time.Minute, "the searches past the tenth a minute apart")
	assert.Equal(t, status.OrderCancelled, r.queryState(t).Status)
}

// Two transactions found by order id, one FAILED and one still PENDING: the
// order waits for the pending one instead of failing on the other.
func TestAFailedTransactionDoesNotDecideWhileAnotherIsPending(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	both := func(second string) func(activities.LookupInput) (activities.LookupResult, error) {
		return func(activities.LookupInput) (activities.LookupResult, error) {
			return activities.LookupResult{Transactions: []gateway.Transaction{
				{TransactionKey: "old", OrderID: orderID, Amount: amount, Status: gateway.StatusFailed, Reason: "LIMIT_EXCEEDED"},
				{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: second},
			}}, nil
		}
	}
	r.lookupReturns(both(gateway.StatusPending), found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Empty(t, r.cancels, "the FAILED transaction has nothing to cancel")
}

// Two live transactions: the one that succeeds confirms the order and the
// other is cancelled, so it can never become a second charge.
func TestAnotherLiveTransactionIsCancelledWhenTheOrderConfirms(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	r.cancelsSucceed(0)
	r.lookupReturns(func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{Transactions: []gateway.Transaction{
			{TransactionKey: "other", OrderID: orderID, Amount: amount, Status: gateway.StatusPending},
			{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: gateway.StatusSuccess},
		}}, nil
	})
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Len(t, r.cancels, 1)
	assert.Equal(t, []string{"other"}, r.cancels[0].TransactionKeys)
}

// A recovery that finds nothing at the gateway and no create that may have
// reached it compensates with the same fence as every payment: CancelOrder
// is told no search was made, so a create answered between the recovery's
// look and its cancel is refused, searched for and cancelled, never left
// charged on a CANCELLED order.
func TestRecoveryCancelIsFenced(t *testing.T) {
	r := newRun(t)
	r.env.RegisterActivity(sw)
	r.env.OnActivity(sw.ReadRecoveryOrder, mock.Anything, mock.Anything).Return(activities.RecoveryOrder{Found: true,
		Order: store.Order{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: amount, UserID: "u1",
			Status: status.OrderRequesting}}, nil)
	r.lookupReturns(func(activities.LookupInput) (activities.LookupResult, error) { return activities.LookupResult{}, nil })
	r.cancelOrderFirst = []error{temporal.NewNonRetryableApplicationError("a create of the order may have reached the gateway",
		activities.ErrGatewayNotSearched, nil)}
	r.cancelsSucceed(1)
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(orderID)})
	r.env.ExecuteWorkflow(workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: orderID})
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	require.Len(t, r.orderEnd, 2)
	assert.True(t, r.orderEnd[0].Unsearched, "the recovery's first CancelOrder says it did not search")
	require.Len(t, r.cancels, 1)
	assert.True(t, r.cancels[0].SearchByOrder, "refused: the gateway searched by order id")
	assert.False(t, r.orderEnd[1].Unsearched)
	assert.Equal(t, status.PaymentRefunded, r.orderEnd[1].Payment, "the charge found was refunded")
}
