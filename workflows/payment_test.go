package workflows_test

import (
	"context"
	"slices"
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

// The payment workflow from the create to the answer: callbacks, polls,
// create failures, bad input.

func TestCallbackSuccessConfirms(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.callbackAt(2*time.Second, gateway.StatusSuccess, txKey)
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Empty(t, r.lookups, "the callback came before the first poll")
	assert.Equal(t, 1, st.Attempts)
}

func TestCallbackFailedReleasesStock(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.callbackAt(2*time.Second, gateway.StatusFailed, txKey)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentFailed, st.PaymentStatus)
	assert.Equal(t, "LIMIT_EXCEEDED", st.Reason)
	last := r.lastSettle(t)
	assert.Equal(t, store.ReleaseReservation, last.Reservation)
	assert.Equal(t, status.OrderFailed, last.Order)
}

func TestPollSuccessWithoutCallback(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.lookupReturns(found(gateway.StatusPending), found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Len(t, r.lookups, 2)
	assert.Equal(t, txKey, r.lookups[0].TransactionKey, "polled by key")
	assert.Equal(t, gateway.StatusSuccess, st.LastLookup.Result)
}

func TestConnectErrorsTwiceThenAccepted(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayUnreachable, true, 1, ""), failing(activities.ErrGatewayUnreachable, true, 2, ""), accepted(3))
	r.lookupReturns(found(gateway.StatusPending))
	r.callbackAt(10*time.Second, gateway.StatusSuccess, txKey)
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Equal(t, 3, r.requests)
	assert.Equal(t, 3, st.Attempts)
}

func TestConnectErrorsOnEveryAttemptCompensateWithNothingToCancel(t *testing.T) {
	r := newRun(t)
	// The activity says so itself when the third create is the last allowed.
	r.requestReturns(failing(activities.ErrGatewayUnreachable, true, 1, ""), failing(activities.ErrGatewayUnreachable, true, 2, ""),
		failing(activities.ErrGatewayUnreachable, false, 3, ""))
	st := r.execute(t)
	assert.Equal(t, 3, r.requests)
	assert.Equal(t, status.OrderCancelled, st.Status)
	assert.Equal(t, status.PaymentCancelled, st.PaymentStatus)
	assert.Empty(t, r.cancels, "nothing reached the gateway, so nothing is cancelled there")
	require.Len(t, r.orderEnd, 1)
	assert.Equal(t, status.PaymentCancelled, r.orderEnd[0].Payment)
}

func TestRejectedCreateFailsWithoutRetry(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayRejected, false, 1, "BAD_REQUEST"))
	st := r.execute(t)
	assert.Equal(t, 1, r.requests)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentFailed, st.PaymentStatus)
	assert.Equal(t, "BAD_REQUEST", st.Reason)
	assert.Equal(t, store.ReleaseReservation, r.lastSettle(t).Reservation)
	assert.Empty(t, r.lookups)
}

// A non-retryable error type listed as retryable by mistake is still stopped
// by the workflow's NonRetryableErrorTypes.
func TestUnknownOutcomeIsNeverRetriedEvenIfMarkedRetryable(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, true, 1, ""))
	r.lookupReturns(found(gateway.StatusSuccess))
	st := r.execute(t)
	assert.Equal(t, 1, r.requests)
	requireConfirmed(t, r, st)
}

func TestReadTimeoutThenFoundByOrderID(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	r.lookupReturns(found(gateway.StatusPending), found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Equal(t, 1, r.requests, "never re-sent")
	assert.Empty(t, r.lookups[0].TransactionKey, "first lookup by order id")
	assert.Equal(t, order.UserID, r.lookups[0].UserID, "under the order's user: a gateway scoping by user finds it")
	assert.Equal(t, txKey, r.lookups[1].TransactionKey, "then by the key it found")
	assert.Equal(t, status.PaymentPending, r.settles[0].Payment, "the found transaction is recorded")
	assert.Equal(t, txKey, r.settles[0].TransactionKey)
}

func TestServerErrorThenNothingAfterGraceIsResentOnce(t *testing.T) {
	r := newRun(t)
	resent := func() (activities.RequestResult, error) {
		return activities.RequestResult{TransactionKey: txKey, Attempt: 1, Attempts: 2}, nil
	}
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, "INTERNAL"), resent)
	r.lookupReturns(nothingFound, nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Equal(t, 2, r.requests, "re-sent exactly once")
	assert.Equal(t, 2, st.Attempts)
	assert.Empty(t, r.sent[0].Grant, "the first create needs no grant")
	assert.Equal(t, "resend-1", r.sent[1].Grant, "the re-send is authorised explicitly")
	for _, in := range r.sent {
		assert.Equal(t, workflows.DefaultTuning().RequestAttempts, in.Limit, "the database enforces the create budget")
	}
}

func TestUnknownWithinGraceIsNotResent(t *testing.T) {
	r := newRun(t)
	r.requestReturns(failing(activities.ErrGatewayOutcomeUnknown, false, 1, ""))
	// 5 s: nothing yet (within the 10 s grace); then the transaction shows up.
	r.lookupReturns(nothingFound, found(gateway.StatusSuccess))
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Equal(t, 1, r.requests)
}

func TestDuplicateAndContradictingCallbacksAreAnomalies(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	// All three are delivered before the workflow reads any of them.
	r.env.RegisterDelayedCallback(func() {
		for _, st := range []string{gateway.StatusSuccess, gateway.StatusSuccess, gateway.StatusFailed} {
			r.env.SignalWorkflow(workflows.CallbackSignal, signed(gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: st}))
		}
	}, 2*time.Second)
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.ElementsMatch(t, []string{"duplicate answer ignored", "contradicting answer ignored"}, r.anomalies())
}

func TestCallbackForAnotherOrderOrAmountIsRejected(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.CallbackSignal, signed(gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: 1, Status: gateway.StatusSuccess}))
		r.env.SignalWorkflow(workflows.CallbackSignal, signed(gateway.Transaction{TransactionKey: txKey, OrderID: "ord-o2", Amount: amount, Status: gateway.StatusSuccess}))
	}, time.Second)
	r.callbackAt(3*time.Second, gateway.StatusFailed, txKey)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status, "only the matching callback counted")
	assert.Equal(t, []string{"callback rejected: it carries another order id or amount", "callback rejected: it carries another order id or amount"}, r.anomalies())
}

func TestCallbackBeforeTheCreateReturns(t *testing.T) {
	r := newRun(t)
	r.env.OnActivity(a.RequestPayment, mock.Anything, mock.Anything).After(3*time.Second).Return(activities.RequestResult{TransactionKey: txKey, Attempt: 1}, nil)
	r.callbackAt(time.Second, gateway.StatusSuccess, txKey)
	st := r.execute(t)
	requireConfirmed(t, r, st)
	assert.Empty(t, r.lookups)
}

func TestOutOfStockIsRejectedWithoutGatewayCall(t *testing.T) {
	r := newRun(t)
	r.reserveSet = true
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(activities.ReserveResult{},
		temporal.NewNonRetryableApplicationError("out of stock", activities.ErrOutOfStock, nil))
	st := r.execute(t)
	assert.Equal(t, status.OrderRejected, st.Status)
	assert.Equal(t, activities.ErrOutOfStock, st.Reason)
	assert.Zero(t, r.requests)
}

func TestInvalidInputFailsAtOnce(t *testing.T) {
	for name, change := range map[string]func(*workflows.PaymentInput){
		"zero amount":    func(in *workflows.PaymentInput) { in.Amount = 0 },
		"no product":     func(in *workflows.PaymentInput) { in.ProductID = "" },
		"no quantity":    func(in *workflows.PaymentInput) { in.Quantity = 0 },
		"deadline > 24h": func(in *workflows.PaymentInput) { in.Deadline = 25 * time.Hour },
	} {
		t.Run(name, func(t *testing.T) {
			r := newRun(t)
			bad := order
			change(&bad)
			r.reserveSet = true
			r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, bad)
			err := r.env.GetWorkflowError()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "invalid order")
		})
	}
}

// While the lookup breaker is open, the next poll comes when the breaker
// may let a lookup through (the activity's RetryAfter), not on the backoff.
func TestPollWhileBreakerOpenFollowsTheBreaker(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	const wait = 7 * time.Second
	openFor := func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable", activities.ErrLookupUnavailable,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{activities.Unavailable{RetryAfter: wait}}})
	}
	var at []time.Time
	answers := []func(activities.LookupInput) (activities.LookupResult, error){openFor, openFor, openFor, found(gateway.StatusSuccess)}
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.LookupInput) (activities.LookupResult, error) {
		at = append(at, r.env.Now())
		return answers[min(len(at)-1, len(answers)-1)](in)
	})
	st := r.execute(t)
	requireConfirmed(t, r, st)
	require.Len(t, at, 4)
	for i := 1; i < len(at); i++ {
		assert.Equal(t, wait, at[i].Sub(at[i-1]).Round(time.Second), "poll %d came when the breaker allowed", i)
	}
}

// A callback signal believes only a body the gateway signed: an unsigned
// one (a client of the namespace without the gateway's secret), one signed
// with another secret, and one whose claims differ from its signed body are
// each recorded and ignored, or read for what the body says; the order is
// decided by the gateway's own answer.
func TestOnlyASignedCallbackDecides(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.env.RegisterDelayedCallback(func() {
		forged := gateway.Transaction{TransactionKey: "FORGED:TR:000000", OrderID: orderID, Amount: amount, Status: gateway.StatusSuccess}
		r.env.SignalWorkflow(workflows.CallbackSignal, workflows.Callback{Transaction: forged})
		otherSecret := signed(forged)
		otherSecret.Signed.Signature = gateway.Sign([]byte("not-the-gateways"), otherSecret.Signed.Timestamp, otherSecret.Signed.Body)
		r.env.SignalWorkflow(workflows.CallbackSignal, otherSecret)
		// Claims SUCCESS beside a signed FAILED: the body is what counts.
		lying := signed(gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: gateway.StatusFailed, Reason: "LIMIT_EXCEEDED"})
		lying.Status = gateway.StatusSuccess
		r.env.SignalWorkflow(workflows.CallbackSignal, lying)
	}, 2*time.Second)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, txKey, st.TransactionKey)
	assert.Equal(t, []string{"callback signal ignored: the gateway did not sign it", "callback signal ignored: the gateway did not sign it"},
		r.anomalies())
	assert.Empty(t, r.cancels, "nothing of the forged transaction was cancelled")
}

// A create answered 500 was re-sent; the first had made a transaction after
// all, which no answer named. A FAILED callback for one of them does not end
// the order: its transactions are searched by order id first, the second
// is found PENDING and awaited, and its SUCCESS confirms the order.
func TestAFailedAnswerAfterSeveralCreatesSearchesTheOrderFirst(t *testing.T) {
	const hidden = "20261130:TR:000002"
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2)) // re-sent after nothing was found
	r.callbackAt(20*time.Second, gateway.StatusFailed, txKey)
	both := func(second string) func(activities.LookupInput) (activities.LookupResult, error) {
		return func(activities.LookupInput) (activities.LookupResult, error) {
			return activities.LookupResult{Transactions: []gateway.Transaction{
				{TransactionKey: txKey, OrderID: orderID, Status: gateway.StatusFailed},
				{TransactionKey: hidden, OrderID: orderID, Status: second}}}, nil
		}
	}
	r.lookupReturns(nothingFound, both(gateway.StatusPending), both(gateway.StatusSuccess))
	st := r.execute(t)
	assert.Equal(t, status.OrderConfirmed, st.Status)
	assert.Equal(t, hidden, st.TransactionKey)
	searched := slices.ContainsFunc(r.lookups[1:], func(in activities.LookupInput) bool { return in.TransactionKey == "" })
	assert.True(t, searched, "the FAILED answer's search, by order id: %+v", r.lookups)
}

// A single create: a FAILED answer decides at once, with no search.
func TestAFailedAnswerAfterOneCreateDecidesAtOnce(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	r.callbackAt(2*time.Second, gateway.StatusFailed, txKey)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Empty(t, r.lookups)
}
