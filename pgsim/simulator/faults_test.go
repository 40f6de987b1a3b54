package simulator_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// Injected faults: errors, timeouts, latency, a gateway that is down, and
// the admin API that sets them.

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
	testenv.Eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 1 }, "the held create is still processed and called back")
	assert.Equal(t, "SUCCESS", sink.received()[0].Status)
}

// A create answered 500 after creating: the client sees the gateway's
// complete error answer (an outcome unknown, never "not sent"), yet the
// transaction exists — a lookup by order id lists it, and it is decided and
// called back as any other.
func TestCreatedThen500HoldsTheTransactionItDenies(t *testing.T) {
	f := testenv.QuietFaults()
	f.Create.CreatedThen500Rate = 1
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	c, err := gateway.New(gateway.Config{BaseURL: s.GatewayURL()})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 1000, CardType: "KB",
		CardNo: "1111-2222-3333-4444", CallbackURL: sink.srv.URL}, "", "")
	require.ErrorIs(t, err, gateway.ErrOutcomeUnknown, "a 5xx proves nothing about the charge")
	var gerr *gateway.Error
	require.ErrorAs(t, err, &gerr)
	assert.Equal(t, http.StatusInternalServerError, gerr.StatusCode)
	assert.Equal(t, gateway.CodeInternalError, gerr.Code, "a complete error body, decoded")

	st := s.Stats().Orders["order-1"]
	assert.Equal(t, 1, st.CreateRequests)
	assert.Equal(t, 1, st.CreatedThen500)
	require.Len(t, st.Transactions, 1, "the 500 came after the transaction was made")
	found, err := c.PaymentsByOrder(context.Background(), "order-1")
	require.NoError(t, err)
	require.Len(t, found.Transactions, 1, "a lookup by order id finds it")
	assert.Equal(t, st.Transactions[0], found.Transactions[0].TransactionKey)
	testenv.Eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 1 }, "it is decided and called back as usual")
	assert.Equal(t, st.Transactions[0], sink.received()[0].TransactionKey)
}

// Under an idempotency key the gateway acted once: the key's next request
// replays that acting (200 and the transaction), not the 500, and makes no
// second transaction.
func TestCreatedThen500UnderAKeyReplaysTheTransaction(t *testing.T) {
	f := slowProcessing()
	f.Create.CreatedThen500Rate = 1
	s := testenv.Pgsim(t, f)
	first := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	require.Equal(t, http.StatusInternalServerError, first.status, first.rawBody)
	again := create(t, s, "order-1", "k1", "http://127.0.0.1:1/cb")
	require.Equal(t, http.StatusOK, again.status, again.rawBody)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	st := s.Stats().Orders["order-1"]
	require.Len(t, st.Transactions, 1)
	assert.Equal(t, st.Transactions[0], again.body["transactionKey"])
	assert.Equal(t, 1, st.CreatedThen500, "a replay is not a create that acted")

	// Without a key every create acts: the rate applies to each.
	create(t, s, "order-2", "", "http://127.0.0.1:1/cb")
	create(t, s, "order-2", "", "http://127.0.0.1:1/cb")
	assert.Equal(t, 2, s.Stats().Orders["order-2"].CreatedThen500)
	assert.Len(t, s.Stats().Orders["order-2"].Transactions, 2)
}

func TestCreatedThen500RateIsPatchedAndBounded(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	testenv.PatchFaults(t, s, map[string]any{"create": map[string]any{"createdThen500Rate": 0.25}})
	assert.Equal(t, 0.25, s.Faults().Create.CreatedThen500Rate)
	assert.Zero(t, s.Faults().Create.ErrorRate, "the endpoint's other faults keep their value")
	var out map[string]any
	assert.Equal(t, 400, testenv.Admin(t, s, "PATCH", "/admin/faults", map[string]any{"create": map[string]any{"createdThen500Rate": 1.5}}, &out))
	assert.Contains(t, out["message"], "create.createdThen500Rate must be within 0..1")
	var got map[string]any
	testenv.Admin(t, s, "GET", "/admin/faults", nil, &got)
	assert.Equal(t, 0.25, got["create"].(map[string]any)["createdThen500Rate"], "the admin API names it create.createdThen500Rate")
	assert.NotContains(t, got["lookup"], "createdThen500Rate", "only a create has it")
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

func TestProcessingOutcomesFollowTheRates(t *testing.T) {
	f := testenv.QuietFaults()
	f.Processing.SuccessRate = 0
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	for i := range 30 {
		create(t, s, fmt.Sprintf("order-%d", i), "", sink.srv.URL)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(sink.received()) == 30 }, "30 callbacks")
	reasons := map[string]int{}
	for _, tx := range sink.received() {
		assert.Equal(t, "FAILED", tx.Status)
		reasons[tx.Reason]++
	}
	assert.Equal(t, 30, reasons["LIMIT_EXCEEDED"]+reasons["INVALID_CARD"])
	assert.Positive(t, reasons["LIMIT_EXCEEDED"])
	assert.Positive(t, reasons["INVALID_CARD"])
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
