package simulator_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
)

// pgsim holds orderId and X-USER-ID to payguard's id rule and answers any
// other with a JSON 400 BAD_REQUEST naming the rule, making no transaction;
// a lookup by an order id outside it is a 400 too. The boundaries (64
// characters, each allowed punctuation mark) are accepted. Before, any
// orderId up to 128 characters and any user header were taken.
func TestIDsOutsideTheRuleAreBadRequests(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	createURL := s.GatewayURL() + "/api/v1/payments"
	refused := []struct {
		name, user, orderID, message string
	}{
		{"65-character order id", "u1", strings.Repeat("o", 65), `order id "` + strings.Repeat("o", 65) + `" must be 6–64 characters`},
		{"NUL in order id", "u1", "o\x00", `order id "o\x00" must be 6–64 characters`},
		{"slash in order id", "u1", "o/1", `order id "o/1" must be 6–64 characters`},
		{"non-ASCII order id", "u1", "ordér", `order id "ordér" must be 6–64 characters`},
		{"65-character user id", strings.Repeat("u", 65), "order-1", `user id "` + strings.Repeat("u", 65) + `" must be 1–64 characters`},
		{"space in user id", "u 1", "order-1", `user id "u 1" must be 1–64 characters`},
		{"hash in user id", "u#1", "order-1", `user id "u#1" must be 1–64 characters`},
	}
	for _, tc := range refused {
		got := do(t, http.MethodPost, createURL, map[string]string{"X-USER-ID": tc.user}, createBody(tc.orderID, 5000, "http://127.0.0.1:1/cb"))
		assert.Equal(t, 400, got.status, "%s: %s", tc.name, got.rawBody)
		assert.Equal(t, "application/json", got.header.Get("Content-Type"), tc.name)
		assert.Equal(t, "BAD_REQUEST", got.body["code"], tc.name)
		assert.Contains(t, got.body["message"], tc.message, tc.name)
	}
	for _, orderID := range []string{strings.Repeat("o", 65), "o\x00", "a b", ""} {
		got := do(t, http.MethodGet, createURL+"?orderId="+url.QueryEscape(orderID), nil, "")
		assert.Equal(t, 400, got.status, "lookup %q: %s", orderID, got.rawBody)
		assert.Equal(t, "BAD_REQUEST", got.body["code"])
	}
	assert.Empty(t, s.Stats().Orders, "no refused request made a transaction or was counted as an order's create")

	// Order ids also need the simulator's 6 characters (see the conformance test).
	for _, id := range []string{strings.Repeat("a", 64), "order.1", "order_1", "order:1", "order-1", "a.b_c:d-e"} {
		got := do(t, http.MethodPost, createURL, map[string]string{"X-USER-ID": id}, createBody(id, 5000, "http://127.0.0.1:1/cb"))
		require.Equal(t, 200, got.status, "%q: %s", id, got.rawBody)
		view := do(t, http.MethodGet, createURL+"/"+url.PathEscape(got.body["transactionKey"].(string)), nil, "")
		assert.Equal(t, id, view.body["orderId"])
		list := do(t, http.MethodGet, createURL+"?orderId="+url.QueryEscape(id), nil, "")
		require.Equal(t, 200, list.status, "%q: %s", id, list.rawBody)
		assert.Len(t, list.body["transactions"], 1, id)
	}
}
