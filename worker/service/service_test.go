package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	wm "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
)

// The worker on the real stack (Temporal dev server, PostgreSQL, pgsim):
// orders confirmed by callback or poll, cancels, late answers, metrics and health.

func TestOrderConfirmedByARealCallback(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(200*time.Millisecond), func(c *service.Config) {
		c.PollInitial, c.PollMax = time.Minute, time.Minute // only the callback can answer in time
	})
	setStock(t, s, 5)
	v, _ := orderView(t, s, "order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", "cb-0001", "--wait", "--json")
	assert.Equal(t, status.OrderConfirmed, v.Status)
	assert.Equal(t, status.PaymentSuccess, v.PaymentStatus)
	assert.NotEmpty(t, v.TransactionKey)
	assert.Nil(t, v.LastLookup, "no lookup was needed")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock(t, s))
	assert.Contains(t, metrics(t, s), `payguard_callbacks_total{code="200"} 1`)
	assert.Equal(t, 1, s.Sim.Stats().Orders["cb-0001"].CreateRequests)
}

func TestOrderConfirmedByPollingWhenTheCallbackIsDropped(t *testing.T) {
	t.Parallel()
	f := processing(100 * time.Millisecond)
	f.Callback.DropRate = 1
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, 5)
	v, _ := orderView(t, s, "order", "--product", "P1", "--qty", "1", "--amount", "700", "--order-id", "poll-0001", "--wait", "--json")
	assert.Equal(t, status.OrderConfirmed, v.Status)
	require.NotNil(t, v.LastLookup)
	assert.Equal(t, gateway.StatusSuccess, v.LastLookup.Result)
	assert.NotContains(t, metrics(t, s), `payguard_callbacks_total{code="200"}`)
}

func TestStatusWhilePendingAndCancelCompensates(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	placeOrder(t, s, "pend-1")
	waitStatus(t, s, "pend-1", status.OrderPending)

	v, out := orderView(t, s, "status", "pend-1", "--json")
	assert.Equal(t, status.OrderPending, v.Status)
	assert.Equal(t, status.PaymentPending, v.PaymentStatus)
	assert.NotEmpty(t, v.TransactionKey)
	assert.Equal(t, 1, v.Attempts)
	require.NotNil(t, v.Deadline)
	assert.WithinDuration(t, time.Now().Add(10*time.Minute), *v.Deadline, time.Minute)
	assert.Equal(t, map[string]string{"workflow": "ok", "database": "ok"}, v.Sources)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, field := range []string{"orderId", "status", "paymentStatus", "transactionKey", "attempts", "lastLookup", "deadline"} {
		assert.Contains(t, raw, field)
	}

	out, err := starter(context.Background(), s, "cancel", "pend-1", "--json")
	require.NoError(t, err, out)
	o := waitStatus(t, s, "pend-1", status.OrderCancelled)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, store.ReservationReleased, o.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
	assert.Equal(t, 1, s.Sim.Stats().Orders["pend-1"].Cancelled)

	_, err = starter(context.Background(), s, "cancel", "pend-1")
	assert.ErrorContains(t, err, "already ended")
	_, err = starter(context.Background(), s, "status", "nobody")
	assert.ErrorContains(t, err, "unknown order")
}

func TestCallbackEndpointAnswers(t *testing.T) {
	t.Parallel()
	s, o := pendingOrder(t, "ep-0001")
	events := func() int {
		list, err := s.Store.Events(context.Background(), "ep-0001")
		require.NoError(t, err)
		return len(list)
	}
	before, eventsBefore := o, events()
	good := callbackBody("ep-0001", o.TransactionKey, gateway.StatusSuccess, o.Amount)
	now := time.Now()

	code, _ := postCallback(t, s, good, "forged-secret", now)
	assert.Equal(t, 401, code, "bad signature")
	code, _ = postCallback(t, s, good, testenv.Secret, now.Add(-10*time.Minute))
	assert.Equal(t, 401, code, "stale timestamp")
	code, _ = postCallback(t, s, good, testenv.Secret, now.Add(10*time.Minute))
	assert.Equal(t, 401, code, "timestamp from the future")
	code, _ = postCallback(t, s, []byte(`{"orderId":`), testenv.Secret, now)
	assert.Equal(t, 400, code, "malformed")
	code, _ = postCallback(t, s, []byte(`{"orderId":"ep-0001","transactionKey":"k","amount":5000,"status":"SUCCESS","extra":1}`), testenv.Secret, now)
	assert.Equal(t, 400, code, "unknown field")
	code, _ = postCallback(t, s, callbackBody("ep-0001", "k", "MAYBE", 5000), testenv.Secret, now)
	assert.Equal(t, 400, code, "unknown status")
	code, _ = postCallback(t, s, callbackBody("ep\x001", "k", gateway.StatusSuccess, 5000), testenv.Secret, now)
	assert.Equal(t, 400, code, "an order id outside the id rule (NUL byte)")
	code, _ = postCallback(t, s, callbackBody("nobody", "k", gateway.StatusSuccess, 5000), testenv.Secret, now)
	assert.Equal(t, 404, code, "no such order")
	resp, err := http.Get(s.Config.CallbackURL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode, "wrong method")
	huge := []byte(`{"orderId":"ep-0001","reason":"` + strings.Repeat("x", 70<<10) + `"}`)
	code, _ = postCallback(t, s, huge, testenv.Secret, now)
	assert.Equal(t, 413, code, "too large")

	after, err := s.Store.GetOrder(context.Background(), "ep-0001")
	require.NoError(t, err)
	assert.Equal(t, before, after, "refused callbacks changed nothing")
	assert.Equal(t, eventsBefore, events())

	code, answer := postCallback(t, s, good, testenv.Secret, now)
	assert.Equal(t, 200, code)
	assert.True(t, answer.Accepted)
	waitStatus(t, s, "ep-0001", status.OrderConfirmed)

	code, answer = postCallback(t, s, good, testenv.Secret, now)
	assert.Equal(t, 200, code)
	assert.False(t, answer.Accepted, "the order is already settled")
	list, err := s.Store.Events(context.Background(), "ep-0001")
	require.NoError(t, err)
	assert.Equal(t, store.KindCallback, list[len(list)-1].Kind, "the late callback is recorded")

	m := metrics(t, s)
	for _, c := range []string{"200", "400", "401", "404", "413"} {
		assert.Contains(t, m, `payguard_callbacks_total{code="`+c+`"}`)
	}
}

func TestLateSuccessForACancelledOrderIsRefunded(t *testing.T) {
	t.Parallel()
	s, o := pendingOrder(t, "late-1")
	_, err := starter(context.Background(), s, "cancel", "late-1")
	require.NoError(t, err)
	waitStatus(t, s, "late-1", status.OrderCancelled)
	// The gateway charges anyway, and says so.
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", true)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders["late-1"].Refunded == 1 }, "the late charge refunded at the gateway")
	testenv.Eventually(t, 30*time.Second, func() bool {
		o, err := s.Store.GetOrder(context.Background(), "late-1")
		return err == nil && o.PaymentStatus == status.PaymentRefunded
	}, "payment REFUNDED")
	o, err = s.Store.GetOrder(context.Background(), "late-1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
	assert.Contains(t, metrics(t, s), "\n"+wm.ChargesRefunded+" 1\n", "the refund is counted, once")
}

func TestMetricsShowTheBreakerOpeningWhenTheGatewayIsDown(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = 200*time.Millisecond, 200*time.Millisecond })
	setStock(t, s, 10)
	for i := range 3 {
		placeOrder(t, s, fmt.Sprintf("brk-%04d", i), "--qty", "1")
	}
	for i := range 3 {
		waitStatus(t, s, fmt.Sprintf("brk-%04d", i), status.OrderPending)
	}
	assert.Contains(t, metrics(t, s), `payguard_breaker_state{breaker="gateway-lookup"} 0`)
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(metrics(t, s), `payguard_breaker_state{breaker="gateway-lookup"} 2`)
	}, "breaker open in /metrics")
	m := metrics(t, s)
	assert.Contains(t, m, `payguard_breaker_transitions_total{breaker="gateway-lookup",from="closed",to="open"} 1`)
	assert.Contains(t, m, `payguard_gateway_calls_total{endpoint="lookup",outcome="unreachable"}`)
	// The SDK's own metrics, through its OpenTelemetry contrib: counters
	// as Prometheus counters, timers as histograms in seconds.
	assert.Regexp(t, `(?m)^# TYPE temporal_request_total counter$`, m)
	assert.Regexp(t, `(?m)^temporal_request_latency_seconds_bucket\{.*le="0.005"`, m)
	for i := range 3 {
		o, err := s.Store.GetOrder(context.Background(), fmt.Sprintf("brk-%04d", i))
		require.NoError(t, err)
		assert.Equal(t, status.OrderPending, o.Status, "an open breaker fails no payment")
	}
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(metrics(t, s), `payguard_breaker_transitions_total{breaker="gateway-lookup",from="half-open",to="closed"} 1`)
	}, "breaker closed again")
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	resp, err := http.Get("http://" + s.Worker.Addr() + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, "ok", body["status"])
}

func TestWorkerWaitsForTemporalWithAClearMessage(t *testing.T) {
	t.Parallel()
	cfg := testenv.FastConfig()
	cfg.TemporalAddress = testenv.FreeAddr(t) // nobody listens
	cfg.Namespace, cfg.TaskQueue = "default", "payments"
	cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.GatewayURL, cfg.CallbackURL, cfg.GatewaySecret = "http://127.0.0.1:1", "http://127.0.0.1:1/cb", "s"
	cfg.HTTPAddr = "127.0.0.1:0"
	var logs strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := service.Start(ctx, cfg, slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs}, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "temporal not reachable at "+cfg.TemporalAddress)
	assert.Contains(t, logs.String(), `"msg":"waiting for Temporal"`, "it said what it was waiting for, more than once")
	assert.GreaterOrEqual(t, strings.Count(logs.String(), "waiting for Temporal"), 2)
}
