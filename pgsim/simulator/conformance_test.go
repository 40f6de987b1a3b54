package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// Conformance with the Loopers PG simulator's API document, row by row of
// the table in issue 17, over HTTP. Each row checks the raw JSON: key sets
// exactly, nulls as nulls, so a service written against the document reads
// pgsim's answers as it reads the simulator's.

// keys lists an object's keys, sorted.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// requireSuccess checks the success envelope and returns its data.
func requireSuccess(t *testing.T, c call) map[string]any {
	t.Helper()
	require.Equal(t, []string{"data", "meta"}, keys(c.envelope), c.rawBody)
	assert.Equal(t, map[string]any{"result": "SUCCESS", "errorCode": nil, "message": nil}, c.envelope["meta"], c.rawBody)
	data, ok := c.envelope["data"].(map[string]any)
	require.True(t, ok, "data is an object: %s", c.rawBody)
	return data
}

// requireFailure checks the failure envelope: FAIL, the code, a message,
// data null.
func requireFailure(t *testing.T, c call, status int, code string) {
	t.Helper()
	assert.Equal(t, status, c.status, c.rawBody)
	require.Equal(t, []string{"data", "meta"}, keys(c.envelope), c.rawBody)
	assert.Nil(t, c.envelope["data"], "errors carry data null: %s", c.rawBody)
	meta := c.envelope["meta"].(map[string]any)
	assert.Equal(t, []string{"errorCode", "message", "result"}, keys(meta))
	assert.Equal(t, "FAIL", meta["result"])
	assert.Equal(t, code, meta["errorCode"], c.rawBody)
	assert.NotEmpty(t, meta["message"])
}

const user = "135135"

func createWith(t *testing.T, s *simulator.Server, headers map[string]string, body string) call {
	return do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments", headers, body)
}

func TestConformanceEnvelopeCreateAndLookups(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	h := map[string]string{"X-USER-ID": user}

	// create: 200, data {transactionKey, status PENDING, reason null}.
	c := createWith(t, s, h, createBody("1351039135", 5000, "http://localhost:8080/api/v1/examples/callback"))
	require.Equal(t, http.StatusOK, c.status, c.rawBody)
	data := requireSuccess(t, c)
	key, _ := data["transactionKey"].(string)
	assert.Equal(t, map[string]any{"transactionKey": key, "status": "PENDING", "reason": nil}, data)
	assert.Regexp(t, `^\d{8}:TR:[0-9a-f]{6}$`, key)

	// lookup by key: data {transactionKey, orderId, cardType, cardNo, amount, status, reason}.
	c = do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, h, "")
	require.Equal(t, http.StatusOK, c.status, c.rawBody)
	assert.Equal(t, map[string]any{"transactionKey": key, "orderId": "1351039135", "cardType": "SAMSUNG",
		"cardNo": "1234-5678-9814-1451", "amount": 5000.0, "status": "PENDING", "reason": nil}, requireSuccess(t, c))

	// lookup by order: data {orderId, transactions: [{transactionKey, status, reason}]}.
	c = do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=1351039135", h, "")
	require.Equal(t, http.StatusOK, c.status, c.rawBody)
	assert.Equal(t, map[string]any{"orderId": "1351039135", "transactions": []any{
		map[string]any{"transactionKey": key, "status": "PENDING", "reason": nil}}}, requireSuccess(t, c))

	// A decided FAILED carries its reason as a string.
	testenv.Admin(t, s, "POST", "/admin/transactions/"+key+"/resolve", map[string]any{"status": "FAILED", "reason": "LIMIT_EXCEEDED", "callback": false}, nil)
	c = do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, h, "")
	assert.Equal(t, "LIMIT_EXCEEDED", requireSuccess(t, c)["reason"])

	// Errors: the envelope with data null.
	requireFailure(t, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/20250101:TR:000000", h, ""), http.StatusNotFound, "NOT_FOUND")
	requireFailure(t, do(t, http.MethodGet, s.GatewayURL()+"/nowhere", h, ""), http.StatusNotFound, "NOT_FOUND")
}

func TestConformanceInjectedInstabilityIsInternalError(t *testing.T) {
	f := testenv.QuietFaults()
	f.Create.ErrorRate = 1
	f.Lookup.FailNext = 1
	s := testenv.Pgsim(t, f)
	requireFailure(t, createWith(t, s, map[string]string{"X-USER-ID": user}, createBody("order-inj", 5000, "http://x/cb")),
		http.StatusInternalServerError, "INTERNAL_ERROR")
	requireFailure(t, do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=order-inj", nil, ""),
		http.StatusInternalServerError, "INTERNAL_ERROR")
	assert.Empty(t, s.Stats().Orders["order-inj"].Transactions, "an injected failure did nothing")
}

// A create answered 500 after creating answers exactly as an injected
// instability does — the envelope with INTERNAL_ERROR and data null — while
// the lookup by order id shows the transaction it made.
func TestConformanceCreatedThen500IsInternalErrorWithATransaction(t *testing.T) {
	f := slowProcessing()
	f.Create.CreatedThen500Rate = 1
	s := testenv.Pgsim(t, f)
	h := map[string]string{"X-USER-ID": user}
	requireFailure(t, createWith(t, s, h, createBody("order-c500", 5000, "http://x/cb")), http.StatusInternalServerError, "INTERNAL_ERROR")
	c := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=order-c500", h, "")
	require.Equal(t, http.StatusOK, c.status, c.rawBody)
	txs, _ := requireSuccess(t, c)["transactions"].([]any)
	require.Len(t, txs, 1, c.rawBody)
	tx := txs[0].(map[string]any)
	assert.Equal(t, []string{"reason", "status", "transactionKey"}, keys(tx))
	assert.Equal(t, "PENDING", tx["status"])
}

func TestConformanceValidationIsBadRequest(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	h := map[string]string{"X-USER-ID": user}
	body := func(orderID string, amount int64, cardType, cardNo string) string {
		b, _ := json.Marshal(gateway.CreateRequest{OrderID: orderID, Amount: amount, CardType: cardType, CardNo: cardNo, CallbackURL: "http://localhost:8080/cb"})
		return string(b)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"missing X-USER-ID", nil, body("order-1", 5000, "KB", "1234-5678-9012-3456")},
		{"orderId shorter than 6 characters", h, body("12345", 5000, "KB", "1234-5678-9012-3456")},
		{"card number not dddd-dddd-dddd-dddd", h, body("order-1", 5000, "KB", "1234-5678-9012-345")},
		{"amount zero", h, body("order-1", 0, "KB", "1234-5678-9012-3456")},
		{"amount negative", h, body("order-1", -1, "KB", "1234-5678-9012-3456")},
		{"card type not SAMSUNG/KB/HYUNDAI", h, body("order-1", 5000, "VISA", "1234-5678-9012-3456")},
	} {
		requireFailure(t, createWith(t, s, tc.headers, tc.body), http.StatusBadRequest, "BAD_REQUEST")
	}
	for _, ct := range gateway.CardTypes {
		assert.Equal(t, http.StatusOK, createWith(t, s, h, body("123456", 1, ct, "1234-5678-9012-3456")).status, "6 characters and %s pass", ct)
	}
}

func TestConformanceCallbackURLPrefixIsAFlag(t *testing.T) {
	h := map[string]string{"X-USER-ID": user}
	// Default: any http(s) URL.
	s := testenv.Pgsim(t, testenv.QuietFaults())
	assert.Equal(t, http.StatusOK, createWith(t, s, h, createBody("order-any", 1, "http://127.0.0.1:9/cb")).status)

	// --callback-url-prefix http://localhost:8080 reproduces the simulator.
	cfg, err := simulator.ParseFlags([]string{"--callback-url-prefix", "http://localhost:8080"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	strict := testenv.PgsimWith(t, testenv.QuietFaults(), func(c *simulator.Config) { c.CallbackURLPrefix = cfg.CallbackURLPrefix })
	requireFailure(t, createWith(t, strict, h, createBody("order-pfx", 1, "http://127.0.0.1:9/cb")), http.StatusBadRequest, "BAD_REQUEST")
	assert.Equal(t, http.StatusOK, createWith(t, strict, h, createBody("order-pfx", 1, "http://localhost:8080/api/v1/examples/callback")).status)
}

// Latency holds every answer: success, refusal, injected failure, 404.
func TestConformanceLatencyOnEveryAnswer(t *testing.T) {
	const least = 150 * time.Millisecond
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(least), Max: simulator.Duration(least)}
	f.Lookup.ErrorRate = 1
	s := testenv.Pgsim(t, f)
	h := map[string]string{"X-USER-ID": user}
	for name, send := range map[string]func() call{
		"create":           func() call { return createWith(t, s, h, createBody("order-lat", 1, "http://x/cb")) },
		"validation error": func() call { return createWith(t, s, nil, createBody("order-lat", 1, "http://x/cb")) },
		"injected failure": func() call { return do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments?orderId=order-lat", h, "") },
		"no route":         func() call { return do(t, http.MethodGet, s.GatewayURL()+"/nowhere", h, "") },
	} {
		start := time.Now()
		c := send()
		assert.GreaterOrEqual(t, time.Since(start), least, "%s answered %d too soon", name, c.status)
	}
}

// Callbacks: the lookup's data, bare; unsigned when signing is off, signed
// (our extension) otherwise.
func TestConformanceCallbacksSignedOrNot(t *testing.T) {
	for _, unsigned := range []bool{true, false} {
		got := make(chan *http.Request, 1)
		bodies := make(chan map[string]any, 1)
		sink := newRawSink(t, func(r *http.Request, body map[string]any) {
			got <- r
			bodies <- body
		})
		f := testenv.QuietFaults()
		sim := testenv.PgsimWith(t, f, func(c *simulator.Config) { c.UnsignedCallbacks = unsigned })
		c := createWith(t, sim, map[string]string{"X-USER-ID": user}, createBody("order-cb1", 5000, sink))
		require.Equal(t, http.StatusOK, c.status)
		r, body := <-got, <-bodies
		assert.Equal(t, []string{"amount", "cardNo", "cardType", "orderId", "reason", "status", "transactionKey"}, keys(body))
		assert.Equal(t, "SUCCESS", body["status"])
		assert.Nil(t, body["reason"])
		assert.Equal(t, unsigned, r.Header.Get(gateway.HeaderSignature) == "", "unsigned=%v", unsigned)
		assert.Equal(t, unsigned, r.Header.Get(gateway.HeaderTimestamp) == "", "unsigned=%v", unsigned)
	}
}

// Our extensions answer in the same envelope: cancel, 409 and 422 of
// Idempotency-Key, the admin API.
func TestConformanceExtensionsUseTheEnvelope(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	h := map[string]string{"X-USER-ID": user, "Idempotency-Key": "k-ext"}
	c := createWith(t, s, h, createBody("order-ext", 5000, "http://x/cb"))
	key := requireSuccess(t, c)["transactionKey"].(string)
	replay := createWith(t, s, h, createBody("order-ext", 5000, "http://x/cb"))
	assert.Equal(t, c.rawBody, replay.rawBody, "a replay answers the first answer, envelope and all")
	assert.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	requireFailure(t, createWith(t, s, h, createBody("order-ext", 9999, "http://x/cb")), http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")

	c = do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments/"+key+"/cancel", nil, "")
	data := requireSuccess(t, c)
	assert.Equal(t, "CANCELLED", data["status"])
	assert.Equal(t, "CANCELLED", data["reason"])

	stats := do(t, http.MethodGet, s.AdminURL()+"/admin/stats", nil, "")
	assert.Contains(t, requireSuccess(t, stats), "orders")
	requireFailure(t, do(t, http.MethodPatch, s.AdminURL()+"/admin/faults", nil, `{"latency":{"min":"1s","max":"1ms"}}`), http.StatusBadRequest, "BAD_REQUEST")
	requireFailure(t, do(t, http.MethodDelete, s.AdminURL()+"/admin/faults", nil, ""), http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	assert.True(t, strings.HasPrefix(c.header.Get("Content-Type"), "application/json"))
}

// newRawSink serves callbacks, handing each request and its decoded body to
// fn, and returns its URL.
func newRawSink(t *testing.T, fn func(*http.Request, map[string]any)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		fn(r, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFlagsForTheSimulatorsBehaviour(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := simulator.ParseFlags(nil, none, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.UnsignedCallbacks, "signed by default")
	assert.Empty(t, cfg.CallbackURLPrefix, "any callback URL by default")
	cfg, err = simulator.ParseFlags([]string{"--sign-callbacks=false", "--callback-url-prefix", "http://localhost:8080"}, none, io.Discard)
	require.NoError(t, err)
	assert.True(t, cfg.UnsignedCallbacks)
	assert.Equal(t, "http://localhost:8080", cfg.CallbackURLPrefix)
}
