package activities_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// rig is one set of real components: a fresh database, an in-process pgsim,
// a gateway client and the activities over them.
type rig struct {
	store   *store.Store
	sim     *simulator.Server
	acts    *activities.Activities
	client  *gateway.Client
	breaker *breaker.Breaker
	env     *testsuite.TestActivityEnvironment

	mu      sync.Mutex
	changes []string
	calls   map[string]int
	refusal []time.Duration // each breaker refusal's time inside its activity
}

type observer struct{ r *rig }

func (o observer) GatewayCall(endpoint, outcome string, _ time.Duration) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.calls[endpoint+"/"+outcome]++
}

func (o observer) BreakerRefused(endpoint, state string, took time.Duration) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.calls[endpoint+"/refused/"+state]++
	o.r.refusal = append(o.r.refusal, took)
}

func (o observer) ChargeRefunded() {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.calls["refunded"]++
}

func newRig(t *testing.T, faults simulator.Faults, breaker activities.BreakerSettings, idempotencyKeys bool) *rig {
	t.Helper()
	r := &rig{store: testenv.Store(t), sim: testenv.Pgsim(t, faults), calls: map[string]int{}}
	client, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL(), ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	r.client = client
	r.breaker = activities.NewLookupBreaker(breaker, func(_ string, from, to gobreaker.State) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.changes = append(r.changes, from.String()+">"+to.String())
	})
	r.acts = activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway",
		IdempotencyKeys: idempotencyKeys}, observer{r})
	var suite testsuite.WorkflowTestSuite
	r.env = suite.NewTestActivityEnvironment()
	r.env.RegisterActivity(r.acts)
	ctx := context.Background()
	_, err = r.store.SetStock(ctx, "P1", 5)
	require.NoError(t, err)
	return r
}

func (r *rig) reserve(t *testing.T, orderID string) {
	_, err := r.env.ExecuteActivity(r.acts.Reserve, activities.ReserveInput{OrderID: orderID, ProductID: "P1", Quantity: 2, Amount: 5000, UserID: "u1"})
	require.NoError(t, err)
}

// requestAccepted runs the create activity, which must succeed, and returns
// its result.
func (r *rig) requestAccepted(t *testing.T, orderID string) activities.RequestResult {
	t.Helper()
	v, err := r.env.ExecuteActivity(r.acts.RequestPayment, request(orderID))
	require.NoError(t, err)
	var res activities.RequestResult
	require.NoError(t, v.Get(&res))
	return res
}

func request(orderID string) activities.RequestInput {
	return activities.RequestInput{OrderID: orderID, Amount: 5000, UserID: "u1", CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451"}
}

// appError returns the activity error's type and whether it is retryable.
func appError(t *testing.T, err error) (string, bool) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	return appErr.Type(), !appErr.NonRetryable()
}

func (r *rig) payment(t *testing.T, orderID string) store.Order {
	o, err := r.store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	return o
}

func (r *rig) attempts(t *testing.T, orderID string) []store.Attempt {
	list, err := r.store.Attempts(context.Background(), orderID)
	require.NoError(t, err)
	return list
}

func quiet() simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing.Min, f.Processing.Max = simulator.Duration(time.Hour), simulator.Duration(time.Hour)
	return f
}

// heldCreates is a gateway that does every create but holds its answer
// past the client's read timeout.
func heldCreates() simulator.Faults {
	f := quiet()
	f.Create.TimeoutRate = 1
	f.Create.TimeoutDelay = simulator.Duration(5 * time.Second)
	return f
}

func TestRequestAccepted(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	res := r.requestAccepted(t, "order-1")
	assert.NotEmpty(t, res.TransactionKey)
	o := r.payment(t, "order-1")
	assert.Equal(t, status.OrderPending, o.Status)
	assert.Equal(t, status.PaymentPending, o.PaymentStatus)
	assert.Equal(t, res.TransactionKey, o.TransactionKey)
	assert.Equal(t, store.OutcomeAccepted, r.attempts(t, "order-1")[0].Outcome)
	assert.Equal(t, 1, r.sim.Stats().Orders["order-1"].CreateRequests)
}

// Each way a create can fail, and what the activity makes of it: the error
// type Temporal sees, whether Temporal may retry it, and what the gateway and
// the database were left with.
func TestRequestFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		faults    func() simulator.Faults
		before    func(t *testing.T, r *rig) // after the reserve
		cardNo    string                     // instead of a valid card
		wantKind  string
		wantRetry bool
		why       string // of wantRetry
		check     func(t *testing.T, r *rig)
	}{
		{name: "WhenGatewayDownIsRetryableUnreachable", faults: func() simulator.Faults { f := quiet(); f.Down = true; return f },
			wantKind: activities.ErrGatewayUnreachable, wantRetry: true, why: "the gateway never saw it: safe to retry",
			check: func(t *testing.T, r *rig) {
				assert.Equal(t, store.OutcomeUnreachable, r.attempts(t, "order-1")[0].Outcome)
				assert.Equal(t, status.PaymentRequested, r.payment(t, "order-1").PaymentStatus)
				assert.Zero(t, r.sim.Stats().Requests["create"])
				assert.Equal(t, 1, r.calls["create/unreachable"])
			}},
		{name: "ReadTimeoutIsUnknownAndNotRetryable", faults: heldCreates,
			wantKind: activities.ErrGatewayOutcomeUnknown, why: "the gateway may be charging: a retry could charge twice",
			check: func(t *testing.T, r *rig) {
				assert.Len(t, r.sim.Stats().Orders["order-1"].Transactions, 1, "the gateway did take it")
				o := r.payment(t, "order-1")
				assert.Equal(t, status.PaymentUnknown, o.PaymentStatus)
				assert.Equal(t, status.OrderPending, o.Status)
			}},
		{name: "ServerErrorIsUnknownAndNotRetryable", faults: func() simulator.Faults { f := quiet(); f.Create.ErrorRate = 1; return f },
			wantKind: activities.ErrGatewayOutcomeUnknown,
			check: func(t *testing.T, r *rig) {
				assert.Equal(t, 1, r.calls["create/unknown"])
			}},
		{name: "RejectedIsFailedAndNotRetryable", faults: quiet, cardNo: "not-a-card",
			wantKind: activities.ErrGatewayRejected,
			check: func(t *testing.T, r *rig) {
				o := r.payment(t, "order-1")
				assert.Equal(t, status.PaymentFailed, o.PaymentStatus)
				assert.Equal(t, "BAD_REQUEST", o.PaymentReason)
			}},
		{name: "CreateSentAndNeverAnsweredIsNotSentAgain", faults: quiet,
			before: func(t *testing.T, r *rig) {
				// A worker began attempt 1 and died before recording the answer.
				_, err := r.store.BeginAttempt(context.Background(), store.AttemptRequest{OrderID: "order-1"})
				require.NoError(t, err)
			},
			wantKind: activities.ErrGatewayOutcomeUnknown,
			check: func(t *testing.T, r *rig) {
				assert.Zero(t, r.sim.Stats().Requests["create"], "no second create went out")
				assert.Equal(t, status.PaymentUnknown, r.payment(t, "order-1").PaymentStatus)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.faults(), activities.DefaultBreakerSettings(), false)
			r.reserve(t, "order-1")
			if tc.before != nil {
				tc.before(t, r)
			}
			in := request("order-1")
			if tc.cardNo != "" {
				in.CardNo = tc.cardNo
			}
			_, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
			kind, retry := appError(t, err)
			assert.Equal(t, tc.wantKind, kind)
			assert.Equal(t, tc.wantRetry, retry, tc.why)
			tc.check(t, r)
		})
	}
}

func TestIdempotencyKeyModeRetriesTimeoutsSafely(t *testing.T) {
	f := heldCreates()
	r := newRig(t, f, activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrGatewayUnknownKeyed, kind)
	assert.True(t, retry, "the key makes the retry safe")

	testenv.PatchFaults(t, r.sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})
	res := r.requestAccepted(t, "order-1")
	st := r.sim.Stats().Orders["order-1"]
	assert.Equal(t, 2, st.CreateRequests)
	assert.Equal(t, []string{res.TransactionKey}, st.Transactions, "the retry was answered from the gateway's idempotency store")
	for _, a := range r.attempts(t, "order-1") {
		assert.Equal(t, activities.IdempotencyKey("order-1"), a.IdempotencyKey)
	}
}

func TestLookupBreakerOpensFailsFastAndClosesThroughHalfOpen(t *testing.T) {
	f := quiet()
	r := newRig(t, f, activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5,
		OpenFor: 300 * time.Millisecond, HalfOpenCalls: 3}, false)
	r.reserve(t, "order-1")
	created := r.requestAccepted(t, "order-1")
	lookup := activities.LookupInput{OrderID: "order-1", TransactionKey: created.TransactionKey}

	testenv.PatchFaults(t, r.sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	for range 5 {
		_, err := r.env.ExecuteActivity(r.acts.LookupPayment, lookup)
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrLookupFailed, kind)
		assert.True(t, retry)
	}
	assert.Equal(t, gobreaker.StateOpen, r.breaker.State())
	before := r.sim.Stats().Requests["lookup"]
	for range 10 {
		_, err := r.env.ExecuteActivity(r.acts.LookupPayment, lookup)
		kind, _ := appError(t, err)
		assert.Equal(t, activities.ErrLookupUnavailable, kind)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		assert.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category())
	}
	assert.Equal(t, before, r.sim.Stats().Requests["lookup"], "an open breaker does not touch the network")
	assert.Equal(t, status.PaymentPending, r.payment(t, "order-1").PaymentStatus, "lookup unavailable is not payment failed")

	testenv.PatchFaults(t, r.sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
	deadline := time.Now().Add(5 * time.Second)
	for r.breaker.State() == gobreaker.StateOpen && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the breaker's own clock: nothing to poll but its state
	}
	require.Equal(t, gobreaker.StateHalfOpen, r.breaker.State())
	for range 3 {
		v, err := r.env.ExecuteActivity(r.acts.LookupPayment, lookup)
		require.NoError(t, err)
		var res activities.LookupResult
		require.NoError(t, v.Get(&res))
		assert.Equal(t, gateway.StatusPending, res.Transactions[0].Status)
	}
	assert.Equal(t, gobreaker.StateClosed, r.breaker.State())
	assert.Equal(t, []string{"closed>open", "open>half-open", "half-open>closed"}, r.changes)
	assert.Equal(t, 10, r.calls["lookup/breaker_open"])
}

func TestLookupBreakerDoesNotCountRejections(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	for range 10 {
		v, err := r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "order-1", TransactionKey: "no-such-key"})
		require.NoError(t, err, "a 404 is an answer: no such transaction")
		var res activities.LookupResult
		require.NoError(t, v.Get(&res))
		assert.Empty(t, res.Transactions)
	}
	assert.Equal(t, gobreaker.StateClosed, r.breaker.State())
	assert.Zero(t, r.breaker.Counts().TotalFailures)
}

func TestLookupByOrderIDFindsTransactions(t *testing.T) {
	f := heldCreates()
	r := newRig(t, f, activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
	require.Error(t, err)
	v, err := r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "order-1"})
	require.NoError(t, err)
	var res activities.LookupResult
	require.NoError(t, v.Get(&res))
	require.Len(t, res.Transactions, 1)
	assert.Equal(t, "order-1", res.Transactions[0].OrderID)
}

func TestCancelPaymentsRefundsSuccessAndFindsUnknownByOrder(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	created := r.requestAccepted(t, "order-1")
	testenv.Resolve(t, r.sim, created.TransactionKey, "SUCCESS", "", false)

	var res activities.CancelResult
	for range 2 { // idempotent
		v, err := r.env.ExecuteActivity(r.acts.CancelPayments, activities.CancelInput{OrderID: "order-1", SearchByOrder: true})
		require.NoError(t, err)
		require.NoError(t, v.Get(&res))
	}
	require.Len(t, res.Transactions, 1)
	assert.Equal(t, gateway.StatusCancelled, res.Transactions[0].Status)
	assert.Equal(t, 1, r.sim.Stats().Orders["order-1"].Refunded)
	r.mu.Lock()
	assert.Equal(t, 1, r.calls["refunded"], "one refund observed, though the cancel ran twice")
	r.mu.Unlock()

	testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
	_, err := r.env.ExecuteActivity(r.acts.CancelPayments, activities.CancelInput{OrderID: "order-1", TransactionKeys: []string{created.TransactionKey}})
	_, retry := appError(t, err)
	assert.True(t, retry, "a cancel is retried until acknowledged")
}

func TestReserveSettleAndCancelOrderAreIdempotent(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	r.reserve(t, "order-1")
	_, err := r.env.ExecuteActivity(r.acts.Reserve, activities.ReserveInput{OrderID: "order-2", ProductID: "P1", Quantity: 9, Amount: 1, UserID: "u1"})
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrOutOfStock, kind)
	assert.False(t, retry)
	_, err = r.env.ExecuteActivity(r.acts.Reserve, activities.ReserveInput{OrderID: "order-3", ProductID: "nope", Quantity: 1, Amount: 1, UserID: "u1"})
	kind, _ = appError(t, err)
	assert.Equal(t, activities.ErrUnknownProduct, kind)

	for range 2 {
		_, err = r.env.ExecuteActivity(r.acts.CancelOrder, activities.SettleInput{OrderID: "order-1", Cause: "test"})
		require.NoError(t, err)
	}
	st, err := r.store.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	assert.Equal(t, int64(5), st.Available)
	_, err = r.env.ExecuteActivity(r.acts.Settle, activities.SettleInput{OrderID: "order-1", Order: status.OrderConfirmed, Cause: "too late"})
	kind, retry = appError(t, err)
	assert.Equal(t, activities.ErrIllegalTransition, kind)
	assert.False(t, retry)
	_, err = r.env.ExecuteActivity(r.acts.CancelOrder, activities.SettleInput{OrderID: "never-stored", Cause: "x"})
	require.NoError(t, err, "an order cancelled before it reached the database needs nothing")
	require.False(t, errors.Is(err, store.ErrNotFound))
}

// Two nets cancel one charge at once (a late callback's refund and the
// sender's undo, say): both saw it charged, both cancels are acknowledged,
// and the refund is counted once — one metric increment, one REFUND event
// with the charge's amount.
func TestARefundByTwoNetsIsCountedOnce(t *testing.T) {
	f := quiet()
	f.Latency = simulator.Range{Min: simulator.Duration(150 * time.Millisecond), Max: simulator.Duration(150 * time.Millisecond)}
	r := newRig(t, f, activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	created := r.requestAccepted(t, "order-1")
	testenv.Resolve(t, r.sim, created.TransactionKey, "SUCCESS", "", false)

	var wg sync.WaitGroup
	results := make([]activities.CancelResult, 2)
	for i := range results {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(r.acts)
		wg.Go(func() {
			v, err := env.ExecuteActivity(r.acts.CancelPayments, activities.CancelInput{OrderID: "order-1", TransactionKeys: []string{created.TransactionKey}})
			if assert.NoError(t, err) {
				assert.NoError(t, v.Get(&results[i]))
			}
		})
	}
	wg.Wait()
	for i, res := range results {
		assert.Equal(t, 1, res.Refunded, "net %d: the charge is refunded", i)
	}
	r.mu.Lock()
	assert.Equal(t, 1, r.calls["refunded"], "counted once")
	r.mu.Unlock()
	events, err := r.store.Events(t.Context(), "order-1")
	require.NoError(t, err)
	var refunds []store.Event
	for _, e := range events {
		if e.Kind == store.KindRefund {
			refunds = append(refunds, e)
		}
	}
	require.Len(t, refunds, 1)
	assert.Equal(t, created.TransactionKey, refunds[0].Detail["transaction_key"])
	assert.EqualValues(t, 5000, refunds[0].Detail["amount"])
}
