package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// These tests replay what Temporal does when a create activity is retried
// after its answer was recorded: the worker died before reporting it, its
// StartToClose expired, and Temporal runs the activity again — even when the
// first run's error was non-retryable, since that error never reached the
// server. A retry must return the recorded answer, never send a second create.

func TestRetryAfterAnAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		faults   func() simulator.Faults
		cardNo   string // instead of a valid card
		wantKind string // "" for an accepted create
		// creates counts the creates that reached the gateway: the per-order
		// count where the gateway took the order, the total where it refused it.
		creates    func(r *rig) int
		wantStatus status.Payment
	}{
		{name: "AnAcceptedAnswerReturnsItAndSendsNothing", faults: quiet,
			creates: func(r *rig) int { return r.sim.Stats().Orders["order-1"].CreateRequests }, wantStatus: status.PaymentPending},
		{name: "AnUnknownAnswerDoesNotSendAgain", faults: heldCreates, wantKind: activities.ErrGatewayOutcomeUnknown,
			creates: func(r *rig) int { return r.sim.Stats().Orders["order-1"].CreateRequests }, wantStatus: status.PaymentUnknown},
		{name: "ARejectionReturnsItAndSendsNothing", faults: quiet, cardNo: "not-a-card", wantKind: activities.ErrGatewayRejected,
			creates: func(r *rig) int { return r.sim.Stats().Requests["create"] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.faults(), activities.DefaultBreakerSettings(), false)
			r.reserve(t, "order-1")
			in := request("order-1")
			if tc.cardNo != "" {
				in.CardNo = tc.cardNo
			}
			var keys []string
			for run := range 2 {
				v, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
				if tc.wantKind == "" {
					require.NoError(t, err, "run %d: the retry finds the recorded answer", run)
					var res activities.RequestResult
					require.NoError(t, v.Get(&res))
					keys = append(keys, res.TransactionKey)
					continue
				}
				kind, retry := appError(t, err)
				require.Equal(t, tc.wantKind, kind, "run %d: the retry reports the recorded answer", run)
				assert.False(t, retry)
			}
			if tc.wantKind == "" {
				assert.Equal(t, keys[0], keys[1])
				assert.Len(t, r.sim.Stats().Orders["order-1"].Transactions, 1)
			}
			assert.Equal(t, 1, tc.creates(r), "no second create went out")
			assert.Len(t, r.attempts(t, "order-1"), 1)
			if tc.wantStatus != "" {
				assert.Equal(t, tc.wantStatus, r.payment(t, "order-1").PaymentStatus)
			}
		})
	}
}

// A database blip between recording the gateway's answer and the order's
// status change: the fault is injected by a trigger in the real database
// that fails the first move of the payment to PENDING. Whatever the activity
// does with the failure, and however often Temporal retries it, one create
// goes to the gateway.
func TestDatabaseBlipAfterTheAnswerNeverSendsASecondCreate(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	// Fails exactly once, even though the transaction it fails rolls back.
	testenv.FailFirst(t, r.store.Pool(), 1, "UPDATE", "payments", "NEW.status = 'PENDING'")

	var res activities.RequestResult
	for try := 1; ; try++ {
		require.LessOrEqual(t, try, 3, "the activity settles within a few Temporal retries")
		v, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
		if err == nil {
			require.NoError(t, v.Get(&res))
			break
		}
		if _, retry := appError(t, err); !retry {
			break // a non-retryable answer (outcome unknown) is also an end
		}
	}
	st := r.sim.Stats().Orders["order-1"]
	assert.Equal(t, 1, st.CreateRequests, "one create, whatever failed after it")
	assert.Len(t, st.Transactions, 1)
	if res.TransactionKey != "" {
		assert.Equal(t, st.Transactions[0], res.TransactionKey)
	}
}

// Idempotency-key mode: a 409 means "this key's first request is still being
// worked on" — the outcome is unknown, never "payment failed".
func TestKeyedCreateInProgressAnswer409IsUnknownNotFailed(t *testing.T) {
	f := quiet()
	f.Latency.Min, f.Latency.Max = simulator.Duration(2*time.Second), simulator.Duration(2*time.Second)
	r := newRig(t, f, activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	// Another worker's create of this order is still being worked on.
	other, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL(), ReadTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer other.Close()
	in := request("order-1")
	done := make(chan error, 1)
	go func() {
		_, err := other.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: in.OrderID, Amount: in.Amount,
			CardType: in.CardType, CardNo: in.CardNo, CallbackURL: "http://127.0.0.1:1/callbacks/gateway"}, in.UserID, activities.IdempotencyKey("order-1"))
		done <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() bool { return r.sim.Stats().Orders["order-1"].CreateRequests == 1 }, "first create in flight")

	_, err = r.env.ExecuteActivity(r.acts.RequestPayment, in)
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrGatewayUnknownKeyed, kind, "a 409 is not a refusal of the card")
	assert.True(t, retry, "retried later, the gateway answers from its idempotency store")
	o := r.payment(t, "order-1")
	assert.Equal(t, status.PaymentUnknown, o.PaymentStatus)
	assert.Equal(t, "HELD", o.Reservation)
	require.NoError(t, <-done)
}

// A 422 (the key was used with another body) is our bug, not the card's:
// the stock stays held and the order is looked up.
func TestKeyedCreateKeyReusedAnswer422IsUnknownNotFailed(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	other, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL()})
	require.NoError(t, err)
	defer other.Close()
	// Someone sent another body under this order's key.
	_, err = other.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 5000, CardType: "KB",
		CardNo: "1111-2222-3333-4444", CallbackURL: "http://127.0.0.1:1/other"}, "u1", activities.IdempotencyKey("order-1"))
	require.NoError(t, err)

	_, err = r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrGatewayOutcomeUnknown, kind)
	assert.False(t, retry, "sending the same body again cannot change the gateway's mind")
	o := r.payment(t, "order-1")
	assert.Equal(t, status.PaymentUnknown, o.PaymentStatus)
	assert.Equal(t, "HELD", o.Reservation)
}

// Two workers configured with different callback URLs retry one order's
// create under its key: the body must be the same, or the gateway refuses the
// second with 422.
func TestKeyedCreateBodyIsTheSameFromEveryWorker(t *testing.T) {
	f := heldCreates()
	f.Create.TimeoutDelay = simulator.Duration(500 * time.Millisecond) // past the client's read timeout, then done
	r := newRig(t, f, activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
	kind, _ := appError(t, err)
	require.Equal(t, activities.ErrGatewayUnknownKeyed, kind)
	testenv.PatchFaults(t, r.sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})

	client, err := gateway.New(gateway.Config{BaseURL: r.sim.GatewayURL(), ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer client.Close()
	otherWorker := activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:2/callbacks/gateway",
		IdempotencyKeys: true}, nil)
	r.env.RegisterActivity(otherWorker)
	// Temporal retries the create on the other worker until the gateway has
	// finished the first request and answers from its idempotency store.
	var res activities.RequestResult
	testenv.Eventually(t, 10*time.Second, func() bool {
		v, err := r.env.ExecuteActivity(otherWorker.RequestPayment, request("order-1"))
		if err != nil {
			kind, retry := appError(t, err)
			require.True(t, retry && kind == activities.ErrGatewayUnknownKeyed, "got %s: %v", kind, err)
			return false
		}
		require.NoError(t, v.Get(&res))
		return true
	}, "the retry is answered")
	st := r.sim.Stats().Orders["order-1"]
	assert.Equal(t, []string{res.TransactionKey}, st.Transactions, "answered from the gateway's idempotency store")
	assert.Equal(t, status.PaymentPending, r.payment(t, "order-1").PaymentStatus)
}

// Compensation may find a charge on an order whose create was never
// answered (payment still REQUESTED) and refund it.
func TestCancelOrderRefundsAPaymentStillRequested(t *testing.T) {
	r := newRig(t, heldCreates(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	ctx := context.Background()
	// The create is on the wire: payment REQUESTED.
	require.NoError(t, r.store.Advance(ctx, store.Change{OrderID: "order-1", Payment: status.PaymentRequested, Cause: "create #1 sent"}))
	_, err := r.env.ExecuteActivity(r.acts.CancelOrder, activities.SettleInput{OrderID: "order-1", Payment: status.PaymentRefunded,
		Cause: "deadline passed; the charge found was refunded"})
	require.NoError(t, err)
	o := r.payment(t, "order-1")
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, status.PaymentRefunded, o.PaymentStatus)
	assert.Equal(t, "RELEASED", o.Reservation)
}

// A 200 SUCCESS envelope whose data names no transaction key is an unknown
// outcome, never an ACCEPTED attempt with no key.
func TestAcceptedWithoutAKeyIsAnUnknownOutcome(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{}}`))
	}))
	t.Cleanup(srv.Close)
	client, err := gateway.New(gateway.Config{BaseURL: srv.URL, ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	acts := activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/cb"}, nil)
	r.env.RegisterActivity(acts)
	r.reserve(t, "order-1")
	v, err := r.env.ExecuteActivity(acts.RequestPayment, request("order-1"))
	if err == nil {
		var res activities.RequestResult
		require.NoError(t, v.Get(&res))
		o := r.payment(t, "order-1")
		t.Logf("result %+v; attempt %+v; order %s/%s key %q", res, r.attempts(t, "order-1")[0].Outcome, o.Status, o.PaymentStatus, o.TransactionKey)
		assert.NotEqual(t, store.OutcomeAccepted, r.attempts(t, "order-1")[0].Outcome, "accepted with no transaction key")
		assert.NotEqual(t, status.PaymentPending, o.PaymentStatus)
		return
	}
	kind, _ := appError(t, err)
	assert.Equal(t, activities.ErrGatewayOutcomeUnknown, kind)
}

// An unreachable gateway is retried on CreateRetry's schedule, but the
// retry is never asked for past the order's deadline: the last try comes
// at the deadline, so the order is compensated then, not one backoff
// (up to 10 s) later.
func TestAnUnreachableCreateRetriesNoLaterThanTheDeadline(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
	for _, c := range []struct {
		left    time.Duration
		atLeast time.Duration
		atMost  time.Duration
	}{
		{left: time.Minute, atLeast: activities.CreateRetry.Initial, atMost: activities.CreateRetry.Initial},
		{left: 200 * time.Millisecond, atLeast: time.Millisecond, atMost: 200 * time.Millisecond},
	} {
		in := request("order-1")
		in.Deadline = time.Now().Add(c.left)
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrGatewayUnreachable, appErr.Type())
		assert.False(t, appErr.NonRetryable())
		assert.GreaterOrEqual(t, appErr.NextRetryDelay(), c.atLeast, "deadline in %s", c.left)
		assert.LessOrEqual(t, appErr.NextRetryDelay(), c.atMost, "deadline in %s", c.left)
	}
}

// A keyed create answered 500 is retried under its key on CreateRetry's
// schedule counted in creates the gateway was sent, not in Temporal's
// tries: an order whose creates a breaker refused through an outage (each
// refusal a try) must not start at the schedule's cap once it is back.
// Each run here is a first try, so only the creates count.
func TestKeyedRetriesArePacedByTheCreatesSent(t *testing.T) {
	f := quiet()
	f.Create.ErrorRate = 1
	r := newRig(t, f, activities.DefaultBreakerSettings(), true)
	r.reserve(t, "order-1")
	for i, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrGatewayUnknownKeyed, appErr.Type(), "%v", err)
		assert.Equal(t, want, appErr.NextRetryDelay(), "after create #%d", i+1)
	}
	assert.Len(t, r.attempts(t, "order-1"), 3)
}
