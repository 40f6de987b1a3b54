package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/orders"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// apiStack is a whole stack with the API in front of it.
func apiStack(t *testing.T, pgDecides time.Duration, tune func(*httpapi.Config)) (*testenv.Stack, *httpapi.Server, *client) {
	t.Helper()
	testenv.NeedsServices(t, "PostgreSQL, the Temporal dev server and pgsim")
	s := testenv.NewStack(t, testenv.Processing(pgDecides), nil)
	api := s.StartAPI(t, tune)
	return s, api, newClient(t, api)
}

func order(id, product string, qty, amount int64) map[string]any {
	o := map[string]any{"productId": product, "quantity": qty, "amount": amount, "cardType": "SAMSUNG", "cardNo": "1234-5678-9814-1451"}
	if id != "" {
		o["orderId"] = id
	}
	return o
}

var customer = map[string]string{httpapi.HeaderUser: "user-1"}

// noWorkflow asserts that no workflow was ever started for the order.
func noWorkflow(t *testing.T, s *testenv.Stack, orderID string) {
	t.Helper()
	_, err := testenv.RawTemporal(t).DescribeWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "no workflow for order %s", orderID)
	_, err = s.Store.GetOrder(context.Background(), orderID)
	assert.ErrorIs(t, err, store.ErrNotFound, "no order row for %s", orderID)
}

// An order placed through the API is answered at its first step, its
// stock reserved, and goes on to the gateway's decision; GET shows it as
// `starter status` does.
func TestAnOrderIsAnsweredAtItsFirstStepAndReachesTheGatewaysDecision(t *testing.T) {
	s, _, c := apiStack(t, 300*time.Millisecond, nil)
	r := c.do(http.MethodPut, "/api/v1/products/P1/stock", map[string]any{"available": 5}, nil, true)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)

	r = c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 2, 5000), customer, true)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	var a httpapi.OrderAnswer
	r.decode(t, &a)
	assert.NotEmpty(t, a.OrderID, "an order id is generated")
	assert.Contains(t, []status.Order{status.OrderRequesting, status.OrderPending}, a.Status, "reserved at the answer")
	assert.Equal(t, httpapi.OrderPath(a.OrderID), r.header.Get("Location"))
	st := s.Stock(t, "P1")
	assert.Equal(t, int64(3), st.Available)
	assert.Equal(t, int64(2), st.Reserved+st.Sold, "held at the answer")

	s.WaitOrder(t, a.OrderID, status.OrderConfirmed, 30*time.Second)
	r = c.do(http.MethodGet, "/api/v1/orders/"+a.OrderID, nil, nil, true)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	var v orders.View
	r.decode(t, &v)
	assert.Equal(t, status.OrderConfirmed, v.Status)
	assert.Equal(t, status.PaymentSuccess, v.PaymentStatus)
	assert.Equal(t, orders.SourceOK, v.Sources["database"])

	r = c.do(http.MethodGet, "/api/v1/products/P1/stock", nil, nil, true)
	var after store.Stock
	r.decode(t, &after)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, after)
}

// Out of stock is a 409 with the order REJECTED and nothing reserved.
func TestOutOfStockIsAConflictWithTheOrderRejected(t *testing.T) {
	s, _, c := apiStack(t, 0, nil)
	s.SetStock(t, "P1", 1)
	r := c.do(http.MethodPost, "/api/v1/orders", order("short-0001", "P1", 2, 700), customer, true)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	p := r.problem(t)
	assert.Equal(t, httpapi.CodeOutOfStock, p.Code)
	assert.Equal(t, "short-0001", p.OrderID)
	assert.Equal(t, string(status.OrderRejected), p.OrderStatus)
	assert.Equal(t, int64(1), s.Stock(t, "P1").Available, "nothing reserved")
}

// Bad input is a clear 400 (404 for a product that does not exist) before
// anything is reserved or started.
func TestBadInputIsRefusedBeforeAnythingIsReserved(t *testing.T) {
	s, _, c := apiStack(t, 0, nil)
	s.SetStock(t, "P1", 10)
	with := func(id string, change func(map[string]any)) map[string]any {
		o := order(id, "P1", 1, 700)
		change(o)
		return o
	}
	for _, tc := range []struct {
		name    string
		id      string
		body    any
		headers map[string]string
		code    int
		says    string
	}{
		{"no customer", "bad-nouser", order("bad-nouser", "P1", 1, 700), nil, 400, "X-USER-ID"},
		{"a customer id out of the rule", "bad-user", order("bad-user", "P1", 1, 700), map[string]string{httpapi.HeaderUser: "a b"}, 400, "X-USER-ID"},
		{"an order id the gateway refuses", "short", order("short", "P1", 1, 700), customer, 400, "orderId"},
		{"no product", "bad-noprod", with("bad-noprod", func(o map[string]any) { delete(o, "productId") }), customer, 400, "productId is required"},
		{"quantity 0", "bad-qty", with("bad-qty", func(o map[string]any) { o["quantity"] = 0 }), customer, 400, "quantity"},
		{"a negative amount", "bad-amount", with("bad-amount", func(o map[string]any) { o["amount"] = -5 }), customer, 400, "amount"},
		{"a card type the gateway refuses", "bad-cardtype", with("bad-cardtype", func(o map[string]any) { o["cardType"] = "VISA" }), customer, 400, "cardType"},
		{"a card number the gateway refuses", "bad-cardno", with("bad-cardno", func(o map[string]any) { o["cardNo"] = "1234" }), customer, 400, "cardNo"},
		{"a deadline past a day", "bad-deadline", with("bad-deadline", func(o map[string]any) { o["deadline"] = "25h" }), customer, 400, "deadline"},
		{"an unknown field", "bad-field", with("bad-field", func(o map[string]any) { o["coupon"] = "FREE" }), customer, 400, "coupon"},
		{"not JSON", "", "{productId: P1", customer, 400, "JSON"},
		{"two JSON values", "bad-twice", `{"orderId":"bad-twice","productId":"P1","quantity":1,"amount":7,"cardType":"KB","cardNo":"1234-5678-9814-1451"} {}`, customer, 400, "more than one"},
		{"an empty idempotency key", "bad-key", order("bad-key", "P1", 1, 700), map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: ""}, 400, "Idempotency-Key"},
		{"an unknown product", "bad-product", order("bad-product", "NOPE", 1, 700), customer, 404, "unknown product"},
		{"an unknown product under a key", "bad-product-key", order("bad-product-key", "NOPE", 1, 700),
			map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "bad-product-key"}, 404, "unknown product"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(http.MethodPost, "/api/v1/orders", tc.body, tc.headers, false)
			require.Equal(t, tc.code, r.code, "%s", r.body)
			assert.Contains(t, r.problem(t).Detail, tc.says)
			if tc.id != "" {
				noWorkflow(t, s, tc.id)
			}
		})
	}
	assert.Equal(t, int64(10), s.Stock(t, "P1").Available, "nothing reserved")
}

// A repeat under the same Idempotency-Key and body answers the first
// answer again, without a second order; another body is a 422; a request
// while the first holds the key is a 409.
func TestIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	keyed := map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "checkout-7f3a"}
	first := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), keyed, true)
	require.Equal(t, http.StatusCreated, first.code, "%s", first.body)
	var a httpapi.OrderAnswer
	first.decode(t, &a)

	again := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), keyed, true)
	require.Equal(t, http.StatusOK, again.code, "%s", again.body)
	assert.Equal(t, "true", again.header.Get(httpapi.HeaderReplayed))
	assert.JSONEq(t, string(first.body), string(again.body), "the first answer again")
	assert.Equal(t, int64(9), s.Stock(t, "P1").Available, "one order reserved")

	other := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 2, 900), keyed, true)
	require.Equal(t, http.StatusUnprocessableEntity, other.code, "%s", other.body)
	assert.Equal(t, httpapi.CodeKeyMismatch, other.problem(t).Code)

	// Another customer's key of the same name is another key.
	theirs := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900),
		map[string]string{httpapi.HeaderUser: "user-2", httpapi.HeaderIdempotencyKey: "checkout-7f3a"}, true)
	require.Equal(t, http.StatusCreated, theirs.code, "%s", theirs.body)

	// A key held by a request still in flight.
	held, err := s.Store.BeginIdempotent(context.Background(), "user-1", "held-key", []byte("x"), "held-000001", "P1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.StateFirst, held.State)
	busy := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900),
		map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "held-key"}, true)
	require.Equal(t, http.StatusConflict, busy.code, "%s", busy.body)
	assert.Equal(t, httpapi.CodeKeyInFlight, busy.problem(t).Code)
	assert.Equal(t, int64(8), s.Stock(t, "P1").Available, "two orders in all")
}

// Concurrent requests under one key place one order.
func TestConcurrentRequestsUnderOneKeyPlaceOneOrder(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	keyed := map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "race-1"}
	const n = 6
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes[i] = c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), keyed, true).code })
	}
	wg.Wait()
	created := 0
	for _, code := range codes {
		assert.Contains(t, []int{http.StatusCreated, http.StatusOK, http.StatusConflict}, code)
		if code == http.StatusCreated {
			created++
		}
	}
	assert.Equal(t, 1, created, "one first answer: %v", codes)
	assert.Equal(t, int64(9), s.Stock(t, "P1").Available, "one order reserved")
}

// A repeat of an order id without a key is refused: one order, one payment.
func TestAnOrderIDPlacedTwiceIsAConflict(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	require.Equal(t, http.StatusCreated, c.do(http.MethodPost, "/api/v1/orders", order("twice-0001", "P1", 1, 900), customer, true).code)
	r := c.do(http.MethodPost, "/api/v1/orders", order("twice-0001", "P1", 1, 900), customer, true)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Equal(t, httpapi.CodeAlreadyPlaced, r.problem(t).Code)
	assert.Equal(t, int64(9), s.Stock(t, "P1").Available)
}

// The operator's cancel through the API compensates a PENDING order; a
// second cancel is a 409, an unknown order a 404.
func TestCancelThroughTheAPI(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	require.Equal(t, http.StatusCreated, c.do(http.MethodPost, "/api/v1/orders", order("cancel-0001", "P1", 3, 900), customer, true).code)
	s.WaitOrder(t, "cancel-0001", status.OrderPending, 20*time.Second)
	r := c.do(http.MethodPost, "/api/v1/orders/cancel-0001/cancel", nil, nil, true)
	require.Equal(t, http.StatusAccepted, r.code, "%s", r.body)
	s.WaitOrder(t, "cancel-0001", status.OrderCancelled, 30*time.Second)
	assert.Equal(t, int64(10), s.Stock(t, "P1").Available, "released")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return c.do(http.MethodPost, "/api/v1/orders/cancel-0001/cancel", nil, nil, true).code == http.StatusConflict
	}, "a second cancel refused once the workflow has ended")
	r = c.do(http.MethodPost, "/api/v1/orders/nobody-0001/cancel", nil, nil, true)
	require.Equal(t, http.StatusNotFound, r.code, "%s", r.body)
	r = c.do(http.MethodGet, "/api/v1/orders/nobody-0001", nil, nil, true)
	require.Equal(t, http.StatusNotFound, r.code, "%s", r.body)
}

// With a token, every /api/ request must carry it; /healthz needs none.
func TestTheTokenIsRequired(t *testing.T) {
	token := strings.Repeat("ab", 20)
	s, _, c := apiStack(t, 0, func(cfg *httpapi.Config) { cfg.Token = token })
	s.SetStock(t, "P1", 3)
	r := c.do(http.MethodGet, "/api/v1/products/P1/stock", nil, nil, true)
	require.Equal(t, http.StatusUnauthorized, r.code, "%s", r.body)
	assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	c.token = "wrong"
	r = c.do(http.MethodPost, "/api/v1/orders", order("tok-00001", "P1", 1, 900), customer, true)
	require.Equal(t, http.StatusUnauthorized, r.code, "%s", r.body)
	assert.Contains(t, r.problem(t).Detail, "wrong")
	noWorkflow(t, s, "tok-00001")
	c.token = token
	require.Equal(t, http.StatusOK, c.do(http.MethodGet, "/api/v1/products/P1/stock", nil, nil, true).code)
	resp, err := http.Get(c.base + httpapi.HealthPath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// An oversized body is a 413 and a trickled one is cut off by the read
// timeout; neither reserves anything.
func TestOversizedAndTrickledBodies(t *testing.T) {
	s, api, c := apiStack(t, 0, func(cfg *httpapi.Config) {
		// Reads fast enough to watch; writes as long as a first answer may take.
		cfg.HTTPTimeouts = testenv.FastHTTPTimeouts()
		cfg.HTTPTimeouts.Write = config.DefaultHTTPTimeouts().Write
	})
	s.SetStock(t, "P1", 5)
	big := fmt.Sprintf(`{"orderId":"big-00001","productId":"P1","quantity":1,"amount":7,"cardType":"KB","cardNo":"1234-5678-9814-1451","deadline":"%s"}`,
		strings.Repeat("9", httpapi.MaxBodyBytes))
	r := c.do(http.MethodPost, "/api/v1/orders", big, customer, false)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.code, "%s", r.body)
	noWorkflow(t, s, "big-00001")
	took := testenv.TrickleBody(t, http.MethodPost, "http://"+api.Addr()+"/api/v1/orders", 50*time.Millisecond, 10*time.Second)
	t.Logf("a trickled body was cut off after %s", took)
	assert.Equal(t, int64(5), s.Stock(t, "P1").Available, "nothing reserved")
}

// Every request is counted by route and code.
func TestRequestsAreCountedByRouteAndCode(t *testing.T) {
	_, _, c := apiStack(t, 0, nil)
	c.do(http.MethodGet, "/api/v1/products/NOPE/stock", nil, nil, true)
	c.do(http.MethodGet, "/nowhere", nil, nil, false)
	resp, err := http.Get(c.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	page := new(strings.Builder)
	_, _ = fmt.Fprint(page, readAll(t, resp))
	assert.Contains(t, page.String(), `payguard_api_requests_total{code="404",route="GET /api/v1/products/{productId}/stock"} 1`)
	assert.Contains(t, page.String(), `payguard_api_requests_total{code="404",route="unmatched"} 1`)
	assert.Contains(t, page.String(), `payguard_api_request_duration_seconds_count{route="GET /api/v1/products/{productId}/stock"} 1`)
}

// A CONFIRMED order refunded through the API: the gateway refunds its
// charge once, the payment is REFUNDED, its stock is available again, and
// it is not a lost order; a repeat refunds nothing more, and an order not
// CONFIRMED is refused.
func TestRefundThroughTheAPI(t *testing.T) {
	s, _, c := apiStack(t, 200*time.Millisecond, nil)
	s.SetStock(t, "P1", 10)
	confirmedOrder(t, s, c, "refund-0001")
	require.Equal(t, int64(3), s.Stock(t, "P1").Sold)

	r := c.do(http.MethodPost, "/api/v1/orders/refund-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, r.code, "%s", r.body)
	testenv.Eventually(t, 30*time.Second, func() bool {
		st := s.Stock(t, "P1")
		o, err := s.Store.GetOrder(context.Background(), "refund-0001")
		return err == nil && o.PaymentStatus == status.PaymentRefunded && st.Available == 10 && st.Sold == 0
	}, "payment REFUNDED and the stock returned")
	o, err := s.Store.GetOrder(context.Background(), "refund-0001")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, o.Status, "the sale happened; its money and stock went back")
	assert.Equal(t, store.ReservationReturned, o.Reservation)
	tx := s.Sim.Stats().Orders["refund-0001"]
	require.Len(t, tx.Transactions, 1)

	again := c.do(http.MethodPost, "/api/v1/orders/refund-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusAccepted, again.code, "%s", again.body)
	var refunds int
	require.NoError(t, s.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM refunds WHERE order_id = 'refund-0001'`).Scan(&refunds))
	assert.Equal(t, 1, refunds, "refunded once")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 10}, s.Stock(t, "P1"), "returned once")
	outs, err := s.Store.Outcomes(context.Background(), []string{"refund-0001"})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	assert.Empty(t, outs[0].Lost, "a refund the customer asked for is not a lost order")

	require.Equal(t, http.StatusConflict, c.do(http.MethodPost, "/api/v1/orders", order("refund-0002", "P1", 100, 900), customer, true).code)
	r = c.do(http.MethodPost, "/api/v1/orders/refund-0002/refund", nil, nil, true)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	p := r.problem(t)
	assert.Equal(t, httpapi.CodeNotRefundable, p.Code)
	assert.Equal(t, string(status.OrderRejected), p.OrderStatus)
	r = c.do(http.MethodPost, "/api/v1/orders/nobody-0001/refund", nil, nil, true)
	require.Equal(t, http.StatusNotFound, r.code, "%s", r.body)
}
