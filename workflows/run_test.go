package workflows_test

import (
	"context"
	"encoding/json"
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

// The harness of the payment workflow's unit tests: a time-skipping test
// environment whose activities answer from lists and record what they were asked.

// a names the activities the tests mock; VerifyCallback, pure, runs as it
// is, with the tests' secret.
var a = activities.New(nil, nil, nil, activities.Config{CallbackSecret: []byte(callbackSecret)}, nil)

const callbackSecret = "workflow-tests-secret"

// signed is the callback signal the worker's endpoint sends for tx: its
// body signed as the gateway signs it.
func signed(tx gateway.Transaction) workflows.Callback {
	var reason *string
	if tx.Reason != "" {
		reason = &tx.Reason
	}
	body, err := json.Marshal(gateway.TransactionInfo{TransactionKey: tx.TransactionKey, OrderID: tx.OrderID, Amount: tx.Amount,
		Status: tx.Status, Reason: reason, CardType: order.CardType, CardNo: order.CardNo})
	if err != nil {
		panic(err)
	}
	const ts = "1764547200"
	return workflows.Callback{Transaction: tx, Signed: &gateway.SignedCallback{Body: body, Timestamp: ts,
		Signature: gateway.Sign([]byte(callbackSecret), ts, body)}}
}

const (
	orderID = "ord-o1"
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
	// cancelOrderErr is what CancelOrder answers (nil: it succeeds), after
	// the answers of cancelOrderFirst, one per call.
	cancelOrderErr   error
	cancelOrderFirst []error

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

func newRun(t *testing.T) *run { return newTunedRun(t, nil) }

// newTunedRun is newRun with the worker's tuning adjusted by tune.
func newTunedRun(t *testing.T, tune func(*workflows.Tuning)) *run {
	r := &run{}
	r.env = r.NewTestWorkflowEnvironment()
	r.env.SetTestTimeout(30 * time.Second)
	r.start = r.env.Now()
	tuning := workflows.DefaultTuning()
	if tune != nil {
		tune(&tuning)
	}
	workflows.New(tuning).Register(r.env)
	r.env.RegisterActivity(a)
	r.env.OnActivity(a.CancelOrder, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SettleInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.orderEnd = append(r.orderEnd, in)
		r.endedAt = append(r.endedAt, r.env.Now())
		if len(r.cancelOrderFirst) > 0 {
			err := r.cancelOrderFirst[0]
			r.cancelOrderFirst = r.cancelOrderFirst[1:]
			return err
		}
		return r.cancelOrderErr
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
		r.env.SignalWorkflow(workflows.CallbackSignal, signed(gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: amount, Status: st, Reason: reasonFor(st)}))
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
		r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(activities.ReserveResult{Order: store.Order{OrderID: orderID, Status: status.OrderRequesting}}, nil)
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
