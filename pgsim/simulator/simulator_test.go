package simulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// callbackSink records the callbacks it receives, verifying each signature.
type callbackSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []gateway.Transaction
	status atomic.Int32 // answer code; 200 unless set
	tries  atomic.Int32 // every POST, answered or refused
}

func newSink(t *testing.T) *callbackSink {
	s := &callbackSink{}
	s.status.Store(200)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.tries.Add(1)
		body, _ := io.ReadAll(r.Body)
		if err := gateway.Verify([]byte(testenv.Secret), r.Header.Get(gateway.HeaderTimestamp), r.Header.Get(gateway.HeaderSignature),
			body, time.Now(), gateway.DefaultTolerance); err != nil {
			t.Errorf("callback signature: %v", err)
		}
		code := int(s.status.Load())
		if code == 200 {
			var tx gateway.Transaction
			require.NoError(t, json.Unmarshal(body, &tx))
			s.mu.Lock()
			s.got = append(s.got, tx)
			s.mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *callbackSink) received() []gateway.Transaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gateway.Transaction(nil), s.got...)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call is one answer. body is the envelope's data on success; on failure,
// for brevity, {"code": meta.errorCode, "message": meta.message} (the
// conformance test checks the envelope itself, in envelope).
type call struct {
	status   int
	header   http.Header
	body     map[string]any
	envelope map[string]any
	rawBody  string
}

func do(t *testing.T, method, url string, headers map[string]string, body string) call {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	c := call{status: resp.StatusCode, header: resp.Header, rawBody: string(raw)}
	_ = json.Unmarshal(raw, &c.envelope)
	if data, ok := c.envelope["data"].(map[string]any); ok {
		c.body = data
	} else if meta, ok := c.envelope["meta"].(map[string]any); ok {
		c.body = map[string]any{"code": meta["errorCode"], "message": meta["message"]}
	}
	return c
}

func createBody(orderID string, amount int64, callbackURL string) string {
	b, _ := json.Marshal(gateway.CreateRequest{OrderID: orderID, Amount: amount, CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", CallbackURL: callbackURL})
	return string(b)
}

func create(t *testing.T, s *simulator.Server, orderID, key, callbackURL string) call {
	h := map[string]string{"X-USER-ID": "u1"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments", h, createBody(orderID, 5000, callbackURL))
}

func slowProcessing() simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	return f
}

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
	eventually(t, 2*time.Second, func() bool { return len(s.Stats().Orders["order-1"].Transactions) == 1 }, "first create in flight")
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
	eventually(t, 2*time.Second, func() bool {
		return create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb").header.Get("Idempotent-Replayed") == ""
	}, "key forgotten after its TTL")
	assert.GreaterOrEqual(t, len(s.Stats().Orders["order-1"].Transactions), 2)
}

func TestInjectedCreateErrorMakesNoTransaction(t *testing.T) {
	f := testenv.QuietFaults()
	f.Create.ErrorRate = 1
	f.Create.ErrorStatus = 503
	s := testenv.Pgsim(t, f)
	got := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	assert.Equal(t, 503, got.status)
	st := s.Stats().Orders["order-1"]
	assert.Equal(t, 1, st.CreateRequests)
	assert.Empty(t, st.Transactions)
	// The key was not taken either: once the fault clears, the same key executes.
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"errorRate": 0}})
	assert.Equal(t, 200, create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb").status)
}

func TestFailNextOnLookupsFailsExactlyThatMany(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	key := create(t, s, "order-1", "", "http://127.0.0.1:1/cb").body["transactionKey"].(string)
	testenv.PatchFaults(t, s, map[string]any{"lookup": map[string]any{"failNext": 10, "errorStatus": 503}})
	var codes []int
	for range 12 {
		codes = append(codes, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").status)
	}
	assert.Equal(t, []int{503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 200, 200}, codes)
	assert.Equal(t, 0, s.Faults().Lookup.FailNext)
}

func TestTimeoutRateDoesTheWorkButHoldsTheAnswer(t *testing.T) {
	f := testenv.QuietFaults()
	f.Create.TimeoutRate = 1
	f.Create.TimeoutDelay = simulator.Duration(5 * time.Second)
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	c, err := gateway.New(gateway.Config{BaseURL: s.GatewayURL(), ReadTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = c.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 1000, CardType: "KB",
		CardNo: "1111-2222-3333-4444", CallbackURL: sink.srv.URL}, "", "")
	require.ErrorIs(t, err, gateway.ErrOutcomeUnknown)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Len(t, s.Stats().Orders["order-1"].Transactions, 1, "the create was done")
	eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 1 }, "the held create is still processed and called back")
	assert.Equal(t, "SUCCESS", sink.received()[0].Status)
}

func TestInjectedFaultsOnLookupAndCancel(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	key := create(t, s, "order-1", "", "http://127.0.0.1:1/cb").body["transactionKey"].(string)
	testenv.PatchFaults(t, s, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 502}, "cancel": map[string]any{"errorRate": 1}})
	assert.Equal(t, 502, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").status)
	assert.Equal(t, 502, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=order-1", nil, "").status)
	assert.Equal(t, 500, do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/"+key+"/cancel", nil, "").status)
	testenv.PatchFaults(t, s, map[string]any{"lookup": map[string]any{"errorRate": 0, "timeoutRate": 1, "timeoutDelay": "300ms"}})
	start := time.Now()
	assert.Equal(t, 200, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").status)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	lookup := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "")
	assert.Equal(t, "PENDING", lookup.body["status"], "a cancel that failed by injection did nothing")
}

func TestLatencyIsAddedToAnswers(t *testing.T) {
	f := slowProcessing()
	f.Latency = simulator.Range{Min: simulator.Duration(150 * time.Millisecond), Max: simulator.Duration(200 * time.Millisecond)}
	s := testenv.Pgsim(t, f)
	start := time.Now()
	do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=x", nil, "")
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestDownClosesTheGatewayPortAndUpReopensIt(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	c, err := gateway.New(gateway.Config{BaseURL: s.GatewayURL()})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.PaymentsByOrder(context.Background(), "order-1")
	require.NoError(t, err, "a kept-alive connection exists before the outage")

	testenv.PatchFaults(t, s, map[string]any{"down": true})
	_, err = c.PaymentsByOrder(context.Background(), "order-1")
	require.ErrorIs(t, err, gateway.ErrUnreachable)
	var faults simulator.Faults
	assert.Equal(t, 200, testenv.Admin(t, s, "GET", "/admin/faults", nil, &faults), "the admin port stays up")
	assert.True(t, faults.Down)

	testenv.PatchFaults(t, s, map[string]any{"down": false})
	_, err = c.PaymentsByOrder(context.Background(), "order-1")
	require.NoError(t, err, "the same address answers again")
}

func TestCallbacksAreSignedAndRetried(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	sink := newSink(t)
	sink.status.Store(503)
	created := create(t, s, "order-1", "", sink.srv.URL)
	require.Equal(t, 200, created.status)
	eventually(t, 5*time.Second, func() bool { return sink.tries.Load() >= 2 }, "two refused tries")
	assert.Empty(t, sink.received())
	sink.status.Store(200)
	eventually(t, 10*time.Second, func() bool { return len(sink.received()) == 1 }, "callback delivered after retries")
	got := sink.received()[0]
	assert.Equal(t, created.body["transactionKey"], got.TransactionKey)
	assert.Equal(t, "SUCCESS", got.Status)
	assert.EqualValues(t, 5000, got.Amount)
}

func TestResolveWithoutCallbackSendsNone(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	sink := newSink(t)
	silent := create(t, s, "order-1", "", sink.srv.URL).body["transactionKey"].(string)
	loud := create(t, s, "order-2", "", sink.srv.URL).body["transactionKey"].(string)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+silent+"/resolve", map[string]any{"status": "SUCCESS", "callback": false}, nil)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+loud+"/resolve", map[string]any{"status": "FAILED", "reason": "LIMIT_EXCEEDED"}, nil)
	eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 1 }, "the callback of the loud resolve")
	// The loud callback came through the same sender; the silent one would have been queued first.
	assert.Equal(t, loud, sink.received()[0].TransactionKey)
	assert.Equal(t, "LIMIT_EXCEEDED", sink.received()[0].Reason)
	got := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+silent, nil, "")
	assert.Equal(t, "SUCCESS", got.body["status"])
	assert.Equal(t, 1, s.Stats().Orders["order-1"].Successful)

	assert.Equal(t, 400, testenv.Admin(t, s, "POST", "/admin/transactions/"+silent+"/resolve", map[string]any{"status": "MAYBE"}, nil))
	assert.Equal(t, 404, testenv.Admin(t, s, "POST", "/admin/transactions/nope/resolve", map[string]any{"status": "SUCCESS"}, nil))
}

func TestDroppedCallbackIsStillVisibleByLookup(t *testing.T) {
	f := testenv.QuietFaults()
	f.Callback.DropRate = 1
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	key := create(t, s, "order-1", "", sink.srv.URL).body["transactionKey"].(string)
	eventually(t, 5*time.Second, func() bool {
		return do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").body["status"] == "SUCCESS"
	}, "processed")
	// Give a would-be callback the same chance a delivered one had.
	other := newSink(t)
	testenv.PatchFaults(t, s, map[string]any{"callback": map[string]any{"dropRate": 0}})
	create(t, s, "order-2", "", other.srv.URL)
	eventually(t, 5*time.Second, func() bool { return len(other.received()) == 1 }, "control callback")
	assert.Empty(t, sink.received())
}

func TestDuplicateAndDelayedCallbacks(t *testing.T) {
	f := testenv.QuietFaults()
	f.Callback.DuplicateRate = 1
	f.Callback.Delay = simulator.Duration(300 * time.Millisecond)
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	start := time.Now()
	create(t, s, "order-1", "", sink.srv.URL)
	eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 2 }, "two copies")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Equal(t, sink.received()[0], sink.received()[1])
}

func TestProcessingOutcomesFollowTheRates(t *testing.T) {
	f := testenv.QuietFaults()
	f.Processing.SuccessRate = 0
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	for i := range 30 {
		create(t, s, fmt.Sprintf("order-%d", i), "", sink.srv.URL)
	}
	eventually(t, 10*time.Second, func() bool { return len(sink.received()) == 30 }, "30 callbacks")
	reasons := map[string]int{}
	for _, tx := range sink.received() {
		assert.Equal(t, "FAILED", tx.Status)
		reasons[tx.Reason]++
	}
	assert.Equal(t, 30, reasons["LIMIT_EXCEEDED"]+reasons["INVALID_CARD"])
	assert.Positive(t, reasons["LIMIT_EXCEEDED"])
	assert.Positive(t, reasons["INVALID_CARD"])
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

func TestAdminFaultsPatchMergesAndValidates(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	testenv.PatchFaults(t, s, map[string]any{"lookup": map[string]any{"errorRate": 0.5}, "latency": map[string]any{"max": "20ms"}})
	f := s.Faults()
	assert.Equal(t, 0.5, f.Lookup.ErrorRate)
	assert.Equal(t, 500, f.Lookup.ErrorStatus, "fields not named keep their value")
	assert.Equal(t, simulator.Duration(20*time.Millisecond), f.Latency.Max)

	for _, bad := range []map[string]any{
		{"lookup": map[string]any{"errorRate": 2}},
		{"create": map[string]any{"errorStatus": 200}},
		{"latency": map[string]any{"min": "1s", "max": "10ms"}},
		{"nonsense": true},
		{"callback": map[string]any{"delay": "soon"}},
	} {
		var out map[string]any
		assert.Equal(t, 400, testenv.Admin(t, s, "PATCH", "/admin/faults", bad, &out), "%v", bad)
		assert.NotEmpty(t, out["message"])
	}
	assert.Equal(t, f, s.Faults(), "refused patches change nothing")

	var out map[string]any
	assert.Equal(t, 200, testenv.Admin(t, s, "POST", "/admin/reset", nil, &out))
	assert.Equal(t, testenv.QuietFaults(), s.Faults())
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
	eventually(t, 2*time.Second, func() bool { return runtime.NumGoroutine() > before+5 }, "work in flight")
	require.NoError(t, s.Close())
	require.Error(t, <-held, "the held answer was cut off by Close")
	client.CloseIdleConnections()
	eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines back to %d", before))
}
