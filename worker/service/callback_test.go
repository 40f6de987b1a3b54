package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli/clitest"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// The worker's callback endpoint: what it refuses, what it takes, and that
// it never acknowledges a callback it could not deliver.

// Every malformed, unsigned, stale or unknown callback is refused with its
// own status code and changes nothing; the good one confirms the order, and
// a repeat of it is recorded but not applied.
func TestCallbackEndpointAnswers(t *testing.T) {
	t.Parallel()
	s, o := clitest.PendingOrder(t, "ep-0001")
	events := func() int {
		list, err := s.Store.Events(context.Background(), "ep-0001")
		require.NoError(t, err)
		return len(list)
	}
	before, eventsBefore := o, events()
	good := testenv.CallbackBody("ep-0001", o.TransactionKey, gateway.StatusSuccess, o.Amount)
	now := time.Now()

	code, _ := s.PostCallback(t, good, "forged-secret", now)
	assert.Equal(t, 401, code, "bad signature")
	code, _ = s.PostCallback(t, good, testenv.Secret, now.Add(-10*time.Minute))
	assert.Equal(t, 401, code, "stale timestamp")
	code, _ = s.PostCallback(t, good, testenv.Secret, now.Add(10*time.Minute))
	assert.Equal(t, 401, code, "timestamp from the future")
	code, _ = s.PostCallback(t, []byte(`{"orderId":`), testenv.Secret, now)
	assert.Equal(t, 400, code, "malformed")
	code, _ = s.PostCallback(t, []byte(`{"orderId":"ep-0001","transactionKey":"k","amount":5000,"status":"SUCCESS","extra":1}`), testenv.Secret, now)
	assert.Equal(t, 400, code, "unknown field")
	code, _ = s.PostCallback(t, testenv.CallbackBody("ep-0001", "k", "MAYBE", 5000), testenv.Secret, now)
	assert.Equal(t, 400, code, "unknown status")
	code, _ = s.PostCallback(t, testenv.CallbackBody("ep\x001", "k", gateway.StatusSuccess, 5000), testenv.Secret, now)
	assert.Equal(t, 400, code, "an order id outside the id rule (NUL byte)")
	code, _ = s.PostCallback(t, testenv.CallbackBody("nobody", "k", gateway.StatusSuccess, 5000), testenv.Secret, now)
	assert.Equal(t, 404, code, "no such order")
	resp, err := http.Get(s.Config.CallbackURL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode, "wrong method")
	huge := []byte(`{"orderId":"ep-0001","reason":"` + strings.Repeat("x", 70<<10) + `"}`)
	code, _ = s.PostCallback(t, huge, testenv.Secret, now)
	assert.Equal(t, 413, code, "too large")

	after, err := s.Store.GetOrder(context.Background(), "ep-0001")
	require.NoError(t, err)
	assert.Equal(t, before, after, "refused callbacks changed nothing")
	assert.Equal(t, eventsBefore, events())

	code, answer := s.PostCallback(t, good, testenv.Secret, now)
	assert.Equal(t, 200, code)
	assert.True(t, answer.Accepted)
	s.WaitOrder(t, "ep-0001", status.OrderConfirmed, 30*time.Second)

	code, answer = s.PostCallback(t, good, testenv.Secret, now)
	assert.Equal(t, 200, code)
	assert.False(t, answer.Accepted, "the order is already settled")
	list, err := s.Store.Events(context.Background(), "ep-0001")
	require.NoError(t, err)
	assert.Equal(t, store.KindCallback, list[len(list)-1].Kind, "the late callback is recorded")

	m := s.Metrics(t)
	for _, c := range []string{"200", "400", "401", "404", "413"} {
		assert.Contains(t, m, `payguard_callbacks_total{code="`+c+`"}`)
	}
}

// A callback for an order that is not final but whose workflow is not
// running cannot be applied: the worker must answer 5xx so the gateway
// retries, never 200, and keep a record of it.
func TestCallbackThatCannotBeDeliveredIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	s.SetStock(t, "P1", 5)
	ctx := context.Background()
	// An order in the database with no workflow (it was terminated).
	_, err := s.Store.Reserve(ctx, store.NewOrder{OrderID: "orphan-1", ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u1"})
	require.NoError(t, err)
	require.NoError(t, s.Store.Advance(ctx, store.Change{OrderID: "orphan-1", Order: status.OrderPending, Payment: status.PaymentPending,
		TransactionKey: "tx-orphan", Cause: "gateway accepted"}))

	code, answer := s.PostCallback(t, testenv.CallbackBody("orphan-1", "tx-orphan", gateway.StatusSuccess, 5000), testenv.Secret, time.Now())
	assert.Equal(t, 503, code, "the gateway must retry")
	assert.False(t, answer.Accepted)
	events, err := s.Store.Events(ctx, "orphan-1")
	require.NoError(t, err)
	var kept bool
	for _, e := range events {
		kept = kept || (e.Kind == store.KindCallback && e.Detail["status"] == gateway.StatusSuccess)
	}
	assert.True(t, kept, "the undeliverable callback is on the order's record")
}
