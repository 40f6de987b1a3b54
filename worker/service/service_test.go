package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

func processing(d time.Duration) simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(d), Max: simulator.Duration(d), SuccessRate: 1}
	return f
}

func setStock(t *testing.T, s *testenv.Stack, qty int64) {
	_, err := s.Store.SetStock(context.Background(), "P1", qty)
	require.NoError(t, err)
}

func placeOrder(t *testing.T, s *testenv.Stack, orderID string, extra ...string) cli.Started {
	t.Helper()
	out, err := starter(context.Background(), s, append([]string{"order", "--product", "P1", "--qty", "2", "--amount", "5000",
		"--order-id", orderID, "--json"}, extra...)...)
	require.NoError(t, err, out)
	var started cli.Started
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	return started
}

func waitStatus(t *testing.T, s *testenv.Stack, orderID string, want status.Order) store.Order {
	t.Helper()
	var o store.Order
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		o, err = s.Store.GetOrder(context.Background(), orderID)
		return err == nil && o.Status == want
	}, fmt.Sprintf("order %s %s (last: %s)", orderID, want, o.Status))
	return o
}

func stock(t *testing.T, s *testenv.Stack) store.Stock {
	st, err := s.Store.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	return st
}

func metrics(t *testing.T, s *testenv.Stack) string {
	resp, err := http.Get(s.MetricsURL())
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func postCallback(t *testing.T, s *testenv.Stack, body []byte, secret string, at time.Time) (int, service.CallbackAnswer) {
	t.Helper()
	code, raw, err := cli.PostCallback(context.Background(), s.Config.CallbackURL, []byte(secret), body, at)
	require.NoError(t, err)
	var a service.CallbackAnswer
	b, _ := json.Marshal(raw)
	require.NoError(t, json.Unmarshal(b, &a))
	return code, a
}

func callbackBody(orderID, key, st string, amount int64) []byte {
	b, _ := json.Marshal(gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: amount, Status: st})
	return b
}

func TestOrderConfirmedByARealCallback(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(200*time.Millisecond), func(c *service.Config) {
		c.PollInitial, c.PollMax = time.Minute, time.Minute // only the callback can answer in time
	})
	setStock(t, s, 5)
	out, err := starter(context.Background(), s, "order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", "cb-0001", "--wait", "--json")
	require.NoError(t, err, out)
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
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
	out, err := starter(context.Background(), s, "order", "--product", "P1", "--qty", "1", "--amount", "700", "--order-id", "poll-0001", "--wait", "--json")
	require.NoError(t, err, out)
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, status.OrderConfirmed, v.Status)
	require.NotNil(t, v.LastLookup)
	assert.Equal(t, gateway.StatusSuccess, v.LastLookup.Result)
	assert.NotContains(t, metrics(t, s), `payguard_callbacks_total`)
}

func TestStatusWhilePendingAndCancelCompensates(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	placeOrder(t, s, "pend-1")
	waitStatus(t, s, "pend-1", status.OrderPending)

	out, err := starter(context.Background(), s, "status", "pend-1", "--json")
	require.NoError(t, err, out)
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
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

	out, err = starter(context.Background(), s, "cancel", "pend-1", "--json")
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

func TestStarterCallbackIsAccepted(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	setStock(t, s, 5)
	placeOrder(t, s, "cli-cb")
	waitStatus(t, s, "cli-cb", status.OrderPending)
	out, err := starter(context.Background(), s, "callback", "cli-cb", "--status", "SUCCESS", "--json")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"accepted": true`)
	waitStatus(t, s, "cli-cb", status.OrderConfirmed)
}

func TestCallbackEndpointAnswers(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	setStock(t, s, 5)
	placeOrder(t, s, "ep-0001")
	o := waitStatus(t, s, "ep-0001", status.OrderPending)
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
	s := testenv.NewStack(t, processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	setStock(t, s, 5)
	placeOrder(t, s, "late-1")
	o := waitStatus(t, s, "late-1", status.OrderPending)
	_, err := starter(context.Background(), s, "cancel", "late-1")
	require.NoError(t, err)
	waitStatus(t, s, "late-1", status.OrderCancelled)
	// The gateway charges anyway, and says so.
	testenv.Admin(t, s.Sim, "POST", "/admin/transactions/"+o.TransactionKey+"/resolve", map[string]any{"status": "SUCCESS", "callback": true}, nil)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders["late-1"].Refunded == 1 }, "the late charge refunded at the gateway")
	testenv.Eventually(t, 30*time.Second, func() bool {
		o, err := s.Store.GetOrder(context.Background(), "late-1")
		return err == nil && o.PaymentStatus == status.PaymentRefunded
	}, "payment REFUNDED")
	o, err = s.Store.GetOrder(context.Background(), "late-1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
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
	assert.Contains(t, m, `temporal_`, "the SDK's own metrics are exported")
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

func TestStarterRejectsBadInputBeforeStarting(t *testing.T) {
	t.Parallel()
	keysOnly := func(k string) string {
		if k == codec.KeysEnv {
			return testenv.CodecKeys()
		}
		return ""
	}
	env := cli.Env{Getenv: keysOnly, Stdout: io.Discard, Stderr: io.Discard}
	cases := map[string][]string{
		"got 20 characters ending ****1451":       {"order", "--product", "P1", "--amount", "5", "--card-no", "12345-5678-9814-1451"},
		"--qty must be at least 1":                {"order", "--product", "P1", "--qty", "-1", "--amount", "5"},
		"--amount must be positive":               {"order", "--product", "P1", "--qty", "1", "--amount", "0"},
		"--card-no must look like":                {"order", "--product", "P1", "--amount", "5", "--card-no", "1234"},
		"--card-type must be one of":              {"order", "--product", "P1", "--amount", "5", "--card-type", "VISA"},
		"--product is required":                   {"order", "--amount", "5"},
		"--deadline must be positive and at most": {"order", "--product", "P1", "--amount", "5", "--deadline", "48h"},
		"unknown command":                         {"pay"},
		"--status must be SUCCESS or FAILED":      {"callback", "o1", "--status", "MAYBE"},
		"QTY must be a whole number":              {"stock", "set", "P1", "many"},
		"want 1 argument(s)":                      {"status"},
		"--rate must be positive":                 {"load", "--rate", "0", "--duration", "1s"},
		"--amount must be positive (minor units)": {"load", "--rate", "1", "--duration", "1s", "--amount", "-5"},
		"temporal unreachable at 127.0.0.1:1":     {"order", "--product", "P1", "--amount", "5", "--temporal-address", "127.0.0.1:1"},
		"invalid value \"x\" for flag -qty":       {"order", "--product", "P1", "--qty", "x"},
		"postgres unreachable at postgres://nobo": {"stock", "show", "P1", "--database-url", "postgres://nobody@127.0.0.1:1/x"},
	}
	for want, args := range cases {
		err := cli.Run(context.Background(), args, env)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), want, "%v", args)
		assert.NotContains(t, err.Error(), "\n\n", "one clear line")
		assert.NotContains(t, err.Error(), "5678", "a card number is never echoed")
	}
	// No key ring: refused before dialling, saying how to provide one.
	err := cli.Run(context.Background(), []string{"order", "--product", "P1", "--amount", "5", "--codec-key-file", filepath.Join(t.TempDir(), "none")},
		cli.Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no payload codec key")
	assert.Contains(t, err.Error(), codec.KeysEnv)
}

func TestStockCommands(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	out, err := starter(context.Background(), s, "stock", "set", "P9", "7", "--json")
	require.NoError(t, err)
	assert.JSONEq(t, `{"productId":"P9","total":7,"available":7,"reserved":0,"sold":0}`, out)
	out, err = starter(context.Background(), s, "stock", "show", "P9")
	require.NoError(t, err)
	assert.Equal(t, "P9: total 7, available 7, reserved 0, sold 0", out)
	_, err = starter(context.Background(), s, "stock", "show", "nope")
	assert.ErrorContains(t, err, "unknown product")
}

func TestSecondStartOfTheSameOrderIsRefused(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	placeOrder(t, s, "dup-0001")
	_, err := starter(context.Background(), s, "order", "--product", "P1", "--amount", "5000", "--order-id", "dup-0001")
	assert.ErrorContains(t, err, "already placed")
	waitStatus(t, s, "dup-0001", status.OrderPending)
	assert.Equal(t, 1, s.Sim.Stats().Orders["dup-0001"].CreateRequests)
}

func TestLoadCommandSummarises(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(100*time.Millisecond), nil)
	out, err := starter(context.Background(), s, "load", "--rate", "10", "--duration", "1s", "--stock", "100", "--metrics-url", s.MetricsURL(), "--json")
	require.NoError(t, err)
	var sum loadgen.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	assert.Equal(t, 10, sum.Started)
	assert.Zero(t, sum.FailedToStart)
	assert.Equal(t, map[string]int{"CONFIRMED": 10}, sum.Final)
	assert.Equal(t, 10, sum.FinalLatency.Count)
	assert.Greater(t, sum.FinalLatency.P50, 0.0)
	st := stock(t, s)
	assert.Equal(t, int64(10), st.Sold)
	table := sum.Table()
	assert.Contains(t, table, "orders_started")
	assert.Contains(t, table, "latency_final_status")
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

func TestStatusSaysWhatItCouldNotReach(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(time.Hour), nil)
	setStock(t, s, 5)
	placeOrder(t, s, "half-1")
	waitStatus(t, s, "half-1", status.OrderPending)
	out, err := starter(context.Background(), s, "status", "half-1", "--json", "--temporal-address", testenv.FreeAddr(t))
	require.NoError(t, err, "the database alone still answers")
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, status.OrderPending, v.Status)
	assert.Equal(t, "ok", v.Sources["database"])
	assert.Contains(t, v.Sources["workflow"], "unreachable")
}

// lockedWriter lets the logger and the test share a buffer safely.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
