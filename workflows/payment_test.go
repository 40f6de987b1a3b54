package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

var a *activities.Activities

const (
	orderID = "o1"
	amount  = int64(5000)
	txKey   = "20261130:TR:000001"
)

var order = workflows.PaymentInput{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: amount, UserID: "u1",
	CardType: "KB", CardNo: "1234-5678-9012-3456", Deadline: 10 * time.Minute}

// run records what the workflow asked of the activities.
type run struct {
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment

	start      time.Time
	reserveSet bool
	settleSet  bool

	mu       sync.Mutex
	requests int
	sent     []activities.RequestInput
	lookups  []activities.LookupInput
	cancels  []activities.CancelInput
	settles  []activities.SettleInput
	orderEnd []activities.SettleInput
	endedAt  []time.Time // when each CancelOrder ran, workflow time
	events   []activities.EventInput
}

func newRun(t *testing.T) *run {
	r := &run{}
	r.env = r.NewTestWorkflowEnvironment()
	r.env.SetTestTimeout(30 * time.Second)
	r.start = r.env.Now()
	workflows.New(workflows.DefaultTuning()).Register(r.env)
	r.env.RegisterActivity(a)
	r.env.OnActivity(a.CancelOrder, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SettleInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.orderEnd = append(r.orderEnd, in)
		r.endedAt = append(r.endedAt, r.env.Now())
		return nil
	}).Maybe()
	r.env.OnActivity(a.RecordEvent, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.EventInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, in)
		return nil
	}).Maybe()
	t.Cleanup(func() { r.env.AssertExpectations(t) })
	return r
}

// requestReturns makes the create activity answer from the list, one per try.
func (r *run) requestReturns(answers ...func() (activities.RequestResult, error)) {
	r.env.OnActivity(a.RequestPayment, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.RequestInput) (activities.RequestResult, error) {
		r.mu.Lock()
		i := r.requests
		r.requests++
		r.sent = append(r.sent, in)
		r.mu.Unlock()
		if i >= len(answers) {
			return activities.RequestResult{}, errors.New("unexpected create")
		}
		return answers[i]()
	})
}

func accepted(attempt int) func() (activities.RequestResult, error) {
	return func() (activities.RequestResult, error) {
		return activities.RequestResult{TransactionKey: txKey, Attempt: attempt, Attempts: attempt}, nil
	}
}

func failing(kind string, retryable bool, attempt int, code string) func() (activities.RequestResult, error) {
	return func() (activities.RequestResult, error) {
		cause := errors.New(kind)
		// In these runs every Temporal try sends one create.
		d := activities.RequestFailure{Attempt: attempt, Attempts: attempt, Code: code}
		if retryable {
			return activities.RequestResult{}, temporal.NewApplicationErrorWithCause(kind, kind, cause, d)
		}
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError(kind, kind, cause, d)
	}
}

// lookupReturns makes the lookup activity answer from the list; the last
// answer repeats.
func (r *run) lookupReturns(answers ...func(activities.LookupInput) (activities.LookupResult, error)) {
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.LookupInput) (activities.LookupResult, error) {
		r.mu.Lock()
		i := len(r.lookups)
		r.lookups = append(r.lookups, in)
		r.mu.Unlock()
		return answers[min(i, len(answers)-1)](in)
	})
}

func found(st string) func(activities.LookupInput) (activities.LookupResult, error) {
	return func(activities.LookupInput) (activities.LookupResult, error) {
		return activities.LookupResult{Transactions: []gateway.Transaction{{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: st}}}, nil
	}
}

func nothingFound(activities.LookupInput) (activities.LookupResult, error) {
	return activities.LookupResult{Transactions: []gateway.Transaction{}}, nil
}

func breakerOpen(activities.LookupInput) (activities.LookupResult, error) {
	return activities.LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable", activities.ErrLookupUnavailable,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

func (r *run) cancelsSucceed(refunded int) {
	r.env.OnActivity(a.CancelPayments, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.CancelInput) (activities.CancelResult, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cancels = append(r.cancels, in)
		return activities.CancelResult{Transactions: []gateway.Transaction{{TransactionKey: txKey, OrderID: orderID, Status: gateway.StatusCancelled}}, Refunded: refunded}, nil
	})
}

func (r *run) callbackAt(after time.Duration, st, key string) {
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.CallbackSignal, gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: amount, Status: st, Reason: reasonFor(st)})
	}, after)
}

func reasonFor(st string) string {
	if st == gateway.StatusFailed {
		return "LIMIT_EXCEEDED"
	}
	return ""
}

func (r *run) execute(t *testing.T) workflows.State {
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, order)
	require.True(t, r.env.IsWorkflowCompleted())
	var st workflows.State
	if err := r.env.GetWorkflowError(); err != nil {
		t.Logf("workflow error: %v", err)
		return r.queryState(t)
	}
	require.NoError(t, r.env.GetWorkflowResult(&st))
	return st
}

func (r *run) defaultReserve() {
	if !r.reserveSet {
		r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(store.Order{OrderID: orderID, Status: status.OrderRequesting}, nil)
		r.reserveSet = true
	}
	if !r.settleSet {
		r.settleTakes(0)
	}
}

// settleTakes makes each Settle take d (workflow time) and records it.
func (r *run) settleTakes(d time.Duration) {
	r.settleSet = true
	r.env.OnActivity(a.Settle, mock.Anything, mock.Anything).After(d).Return(func(_ context.Context, in activities.SettleInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.settles = append(r.settles, in)
		return nil
	}).Maybe()
}

func (r *run) queryState(t *testing.T) workflows.State {
	v, err := r.env.QueryWorkflow(workflows.StateQuery)
	require.NoError(t, err)
	var st workflows.State
	require.NoError(t, v.Get(&st))
	return st
}

func (r *run) lastSettle(t *testing.T) activities.SettleInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.settles)
	return r.settles[len(r.settles)-1]
}

func (r *run) anomalies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Kind == store.KindAnomaly {
			out = append(out, e.Cause)
		}
	}
	return out
}

func requireConfirmed(t *testing.T, r *run, st workflows.State) {
	t.Helper()
	assert.Equal(t, status.OrderConfirmed, st.Status)
	assert.Equal(t, status.PaymentSuccess, st.PaymentStatus)
	assert.Equal(t, txKey, st.TransactionKey)
	last := r.lastSettle(t)
	assert.Equal(t, status.OrderConfirmed, last.Order)
	assert.Equal(t, store.CommitReservation, last.Reservation)
	assert.Empty(t, r.orderEnd, "no compensation")
}

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
	assert.Contains(t, r.anomalies(), "create re-sent: no transaction at the gateway after the grace period")
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
	assert.Equal(t, "cancelled by an operator", r.orderEnd[0].Cause)
	assert.Equal(t, status.OrderCancelled, r.queryState(t).Status)
}

func TestDuplicateAndContradictingCallbacksAreAnomalies(t *testing.T) {
	r := newRun(t)
	r.requestReturns(accepted(1))
	// All three are delivered before the workflow reads any of them.
	r.env.RegisterDelayedCallback(func() {
		for _, st := range []string{gateway.StatusSuccess, gateway.StatusSuccess, gateway.StatusFailed} {
			r.env.SignalWorkflow(workflows.CallbackSignal, gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: amount, Status: st})
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
		r.env.SignalWorkflow(workflows.CallbackSignal, gateway.Transaction{TransactionKey: txKey, OrderID: orderID, Amount: 1, Status: gateway.StatusSuccess})
		r.env.SignalWorkflow(workflows.CallbackSignal, gateway.Transaction{TransactionKey: txKey, OrderID: "o2", Amount: amount, Status: gateway.StatusSuccess})
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
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(store.Order{},
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
