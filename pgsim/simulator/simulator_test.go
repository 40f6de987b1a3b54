package simulator_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// The gateway API as a caller sees it: create, lookup, cancel, idempotency
// keys, stats, reset and shutdown.

func TestCreateLookupCancel(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	created := create(t, s, "order-1", "", "http://127.0.0.1:1/cb")
	require.Equal(t, 200, created.status, created.rawBody)
	key := created.body["transactionKey"].(string)
	assert.Regexp(t, `^\d{8}:TR:[0-9a-f]{6}$`, key)
	assert.Equal(t, map[string]any{"transactionKey": key, "status": "PENDING", "reason": nil}, created.body)

	got := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "")
	require.Equal(t, 200, got.status)
	assert.Equal(t, map[string]any{"transactionKey": key, "orderId": "order-1", "cardType": "SAMSUNG", "cardNo": "1234-5678-9814-1451",
		"amount": 5000.0, "status": "PENDING", "reason": nil}, got.body)

	list := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=order-1", nil, "")
	require.Equal(t, 200, list.status)
	assert.Len(t, list.body["transactions"], 1)
	empty := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=none", nil, "")
	require.Equal(t, 200, empty.status)
	assert.Equal(t, []any{}, empty.body["transactions"])

	for range 2 {
		cancelled := do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/"+key+"/cancel", nil, "")
		require.Equal(t, 200, cancelled.status)
		assert.Equal(t, "CANCELLED", cancelled.body["status"])
	}
	assert.Equal(t, 404, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/nope", nil, "").status)
	assert.Equal(t, 404, do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/nope/cancel", nil, "").status)
	missing := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments", nil, "")
	assert.Equal(t, 400, missing.status)
	for _, c := range []struct{ method, url string }{
		{http.MethodDelete, s.GatewayURL() + "/api/v1/payments/" + key},
		{http.MethodPut, s.GatewayURL() + "/api/v1/payments"},
		{http.MethodGet, s.GatewayURL() + "/api/v1/payments/" + key + "/cancel"},
		{http.MethodDelete, s.AdminURL() + "/admin/faults"},
	} {
		got := do(t, c.method, c.url, nil, "")
		assert.Equal(t, 405, got.status, "%s %s", c.method, c.url)
		assert.Equal(t, "METHOD_NOT_ALLOWED", got.body["code"])
	}
	assert.Equal(t, "NOT_FOUND", do(t, http.MethodGet, s.GatewayURL()+"/nowhere", nil, "").body["code"])
}

func TestCancelOfSuccessRefundsAndOfFailedChangesNothing(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	ok := create(t, s, "order-1", "", "http://127.0.0.1:1/cb").body["transactionKey"].(string)
	bad := create(t, s, "order-2", "", "http://127.0.0.1:1/cb").body["transactionKey"].(string)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+ok+"/resolve", map[string]any{"status": "SUCCESS", "callback": false}, nil)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+bad+"/resolve", map[string]any{"status": "FAILED", "reason": "INVALID_CARD", "callback": false}, nil)

	refunded := do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/"+ok+"/cancel", nil, "")
	assert.Equal(t, "CANCELLED", refunded.body["status"])
	assert.Equal(t, "REFUNDED", refunded.body["reason"])
	failed := do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/"+bad+"/cancel", nil, "")
	assert.Equal(t, "FAILED", failed.body["status"])
	assert.Equal(t, "INVALID_CARD", failed.body["reason"])
	stats := s.Stats()
	assert.Equal(t, 1, stats.Orders["order-1"].Refunded)
	assert.Equal(t, 0, stats.Orders["order-1"].Successful)
}

func TestCreateRejectsBadInputWithClearErrors(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	url := s.GatewayURL() + "/api/v1/payments"
	user := map[string]string{"X-USER-ID": "u1"}
	cases := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		message string
	}{
		{"no user header", nil, createBody("order-1", 1, "http://x/cb"), 400, "X-USER-ID"},
		{"malformed json", user, `{"orderId":`, 400, "malformed JSON"},
		{"empty body", user, ``, 400, "empty body"},
		{"unknown field", user, `{"orderId":"order-1","amount":1,"cardType":"KB","cardNo":"1234-5678-9012-3456","callbackUrl":"http://x","tip":1}`, 400, "unknown field"},
		{"wrong type", user, `{"orderId":"order-1","amount":"1000"}`, 400, `"amount"`},
		{"missing fields", user, `{"amount":1}`, 400, "orderId, cardType, cardNo, callbackUrl"},
		{"zero amount", user, createBody("order-1", 0, "http://x/cb"), 400, "amount must be positive"},
		{"negative amount", user, createBody("order-1", -5, "http://x/cb"), 400, "amount must be positive"},
		{"bad card type", user, strings.Replace(createBody("order-1", 1, "http://x/cb"), "SAMSUNG", "VISA", 1), 400, "cardType"},
		{"bad card number", user, strings.Replace(createBody("order-1", 1, "http://x/cb"), "1234-5678-9814-1451", "1234567898141451", 1), 400, "cardNo"},
		{"trailing data", user, createBody("order-1", 1, "http://x/cb") + "{}", 400, "trailing"},
		{"oversized", user, `{"orderId":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "body over"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, http.MethodPost, url, tc.headers, tc.body)
			assert.Equal(t, tc.status, got.status, got.rawBody)
			assert.Contains(t, got.body["message"], tc.message)
			assert.NotEmpty(t, got.body["code"])
		})
	}
	assert.Empty(t, s.Stats().Orders["order-1"].Transactions, "no bad request made a transaction")
}

func TestIdempotencyReplaysTheFirstAnswer(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	first := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	require.Equal(t, 200, first.status)
	again := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	require.Equal(t, 200, again.status)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.body, again.body)
	assert.Empty(t, first.header.Get("Idempotent-Replayed"))

	other := do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments", map[string]string{"X-USER-ID": "u1", "Idempotency-Key": "k1"},
		createBody("order-1", 9999, "http://127.0.0.1:1/cb"))
	assert.Equal(t, 422, other.status)
	assert.Equal(t, "IDEMPOTENCY_KEY_REUSED", other.body["code"])
	st := s.Stats().Orders["order-1"]
	assert.Len(t, st.Transactions, 1)
	assert.Equal(t, 3, st.CreateRequests, "every create request is counted, replays too")
}

func TestIdempotencyConflictWhileInFlight(t *testing.T) {
	f := slowProcessing()
	f.Latency = simulator.Range{Min: simulator.Duration(400 * time.Millisecond), Max: simulator.Duration(400 * time.Millisecond)}
	s := testenv.Pgsim(t, f)
	done := make(chan call)
	go func() { done <- create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb") }()
	testenv.Eventually(t, 2*time.Second, func() bool { return len(s.Stats().Orders["order-1"].Transactions) == 1 }, "first create in flight")
	second := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	assert.Equal(t, 409, second.status)
	assert.Equal(t, "IDEMPOTENT_REQUEST_PROCESSING", second.body["code"])
	assert.Equal(t, 200, (<-done).status)
}

func TestConcurrentCreatesWithOneKeyMakeOneTransaction(t *testing.T) {
	f := slowProcessing()
	f.Latency = simulator.Range{Min: simulator.Duration(5 * time.Millisecond), Max: simulator.Duration(20 * time.Millisecond)}
	s := testenv.Pgsim(t, f)
	var wg sync.WaitGroup
	codes := make(chan int, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- create(t, s, "order-1", "same-key", "http://127.0.0.1:1/cb").status
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		assert.Contains(t, []int{200, 409}, c)
	}
	st := s.Stats().Orders["order-1"]
	assert.Len(t, st.Transactions, 1)
	assert.Equal(t, 100, st.CreateRequests)
}

func TestIdempotencyOffMakesATransactionPerCreate(t *testing.T) {
	s := simulator.New(simulator.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Secret: []byte("x"), Idempotency: false, Faults: slowProcessing()})
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Close() })
	create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	assert.Len(t, s.Stats().Orders["order-1"].Transactions, 2)
}

func TestIdempotencyKeyExpires(t *testing.T) {
	s := simulator.New(simulator.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Secret: []byte("x"), Idempotency: true,
		IdempotencyTTL: 50 * time.Millisecond, Faults: slowProcessing()})
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Close() })
	create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	testenv.Eventually(t, 2*time.Second, func() bool {
		return create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb").header.Get("Idempotent-Replayed") == ""
	}, "key forgotten after its TTL")
	assert.GreaterOrEqual(t, len(s.Stats().Orders["order-1"].Transactions), 2)
}

func TestStatsCountCreatesPerOrderExactly(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	for range 3 {
		create(t, s, "order-a", "", "http://127.0.0.1:1/cb")
	}
	create(t, s, "order-b", "", "http://127.0.0.1:1/cb")
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"failNext": 2}})
	create(t, s, "order-b", "", "http://127.0.0.1:1/cb")
	create(t, s, "order-b", "", "http://127.0.0.1:1/cb")
	var stats simulator.Stats
	require.Equal(t, 200, testenv.Admin(t, s, "GET", "/admin/stats", nil, &stats))
	assert.Equal(t, 3, stats.Orders["order-a"].CreateRequests)
	assert.Len(t, stats.Orders["order-a"].Transactions, 3)
	assert.Equal(t, 3, stats.Orders["order-b"].CreateRequests)
	assert.Len(t, stats.Orders["order-b"].Transactions, 1)
}

func TestResetForgetsEverything(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	key := create(t, s, "order-1", "k", "http://127.0.0.1:1/cb").body["transactionKey"].(string)
	testenv.PatchFaults(t, s, map[string]any{"down": true})
	testenv.Admin(t, s, "POST", "/admin/reset", nil, nil)
	assert.Empty(t, s.Stats().Orders)
	assert.Equal(t, 404, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").status, "up again and empty")
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	f.Lookup.TimeoutRate = 1
	f.Lookup.TimeoutDelay = simulator.Duration(simulator.MaxAnswerDelay)
	s := simulator.New(simulator.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Secret: []byte("x"), Idempotency: true, Faults: f})
	require.NoError(t, s.Start())
	client := &http.Client{Transport: &http.Transport{}}
	for i := range 5 {
		body := createBody(fmt.Sprintf("order-%d", i), 100, "http://127.0.0.1:1/cb")
		req, _ := http.NewRequest("POST", s.GatewayURL()+"/api/v1/payments", bytes.NewBufferString(body))
		req.Header.Set("X-USER-ID", "u")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	held := make(chan error, 1)
	go func() {
		resp, err := client.Get(s.GatewayURL() + "/api/v1/payments?orderId=order-1") // held for the longest legal delay
		if err == nil {
			resp.Body.Close()
			err = errors.New("answered")
		}
		held <- err
	}()
	testenv.Eventually(t, 2*time.Second, func() bool { return runtime.NumGoroutine() > before+5 }, "work in flight")
	require.NoError(t, s.Close())
	require.Error(t, <-held, "the held answer was cut off by Close")
	client.CloseIdleConnections()
	testenv.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines back to %d", before))
}
