package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// rule and orderRule end a refusal's message: order ids are 6–64
// characters, others 1–64; rule matches both.
const (
	rule      = "must be 1–64 characters of A–Z a–z 0–9 . _ : -"
	orderRule = "must be 6–64 characters of A–Z a–z 0–9 . _ : -"
	anyRule   = "–64 characters of A–Z a–z 0–9 . _ : -"
)

// requireNothingHappened checks an order left no trace anywhere: no
// workflow, no order row, stock untouched, no create at the gateway.
func requireNothingHappened(t *testing.T, s *testenv.Stack, orderID string) {
	t.Helper()
	ctx := context.Background()
	_, err := testenv.Temporal(t).DescribeWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "no workflow was started")
	var orders int
	require.NoError(t, s.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	assert.Zero(t, orders, "no order row")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 10}, stockOf(t, s, "P1"), "stock untouched")
	assert.Zero(t, s.Sim.Stats().Requests["create"], "nothing reached the gateway")
}

// The starter refuses every id outside the rule, in every command that takes
// one, with the rule's message and before it starts, reserves or sends
// anything. A 64-character id with every allowed punctuation mark goes all
// the way to CONFIRMED.
func TestStarterRefusesIDsOutsideTheRuleBeforeAnythingIsReserved(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	setStock(t, s, "P1", 10)
	ctx := context.Background()
	long := testenv.ID("starter") // unique on the shared dev server
	long += strings.Repeat("o", 200-len(long))
	crOrder := testenv.ID("starter-cr")
	order := func(extra ...string) []string {
		return append([]string{"order", "--product", "P1", "--qty", "1", "--amount", "5000"}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"order: 200-character order id", order("--order-id", long), `order id "` + long[:64] + `"… (200 bytes) ` + orderRule},
		{"order: 65-character order id", order("--order-id", long[:65]), `order id "` + long[:65] + `" ` + orderRule},
		{"order: NUL in order id", order("--order-id", "o\x00"), `order id "o\x00" ` + orderRule},
		{"order: 5-character order id (the gateways want 6)", order("--order-id", "ord-1"), `order id "ord-1" ` + orderRule},
		{"order: CR in user id", order("--order-id", crOrder, "--user", "u\r"), `user id "u\r" ` + rule},
		{"order: empty user id", order("--order-id", testenv.ID("starter-nouser"), "--user", ""), `user id "" ` + rule},
		{"order: 65-character product", []string{"order", "--product", long[:65], "--amount", "5000"}, `product id "` + long[:65] + `" ` + rule},
		{"status: NUL in order id", []string{"status", "o\x00"}, `order id "o\x00" ` + rule},
		{"cancel: 200-character order id", []string{"cancel", long}, `order id "` + long[:64] + `"…`},
		{"callback: space in order id", []string{"callback", "o 1", "--status", "SUCCESS"}, `order id "o 1" ` + rule},
		{"stock set: slash in product id", []string{"stock", "set", "P/1", "5"}, `product id "P/1" ` + rule},
		{"stock show: NUL in product id", []string{"stock", "show", "P1\x00"}, `product id "P1\x00" ` + rule},
		{"load: bad product in the list", []string{"load", "--rate", "1", "--duration", "1s", "--products", "P1,P 2"}, `product id "P 2" ` + rule},
		{"load: CR in user id", []string{"load", "--rate", "1", "--duration", "1s", "--products", "P1", "--user", "u\r"}, `user id "u\r" ` + rule},
		{"load: stock set for a bad product", []string{"load", "--rate", "1", "--duration", "1s", "--products", "P1,P\x002", "--stock", "0"}, `product id "P\x002" ` + rule},
	}
	for _, tc := range cases {
		_, err := starter(ctx, s, tc.args...)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
			assert.NotContains(t, err.Error(), "\n", "%s: one line", tc.name)
		}
	}
	requireNothingHappened(t, s, long)
	requireNothingHappened(t, s, crOrder)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 10}, stockOf(t, s, "P1"), "the refused load set no stock")

	edge := "a.b_c:d-" + testenv.ID("edge") // every punctuation mark, unique on the shared dev server
	edge += strings.Repeat("e", 64-len(edge))
	placeOrder(t, s, edge, "P1", 1, "--user", edge)
	o := waitOrder(t, s, edge, status.OrderConfirmed, 30*time.Second)
	assert.Equal(t, edge, o.UserID)
	assert.Equal(t, 1, s.Sim.Stats().Orders[edge].CreateRequests)
}

// A PaymentWorkflow started directly — by any client, not only the starter
// — with ids outside the rule, or a card the gateway would refuse, fails at once with a non-retryable
// InvalidOrder, without scheduling a single activity: no order row, stock
// untouched, nothing at the gateway. Let through, the 200-character id
// would reserve stock and then fail at the gateway, the NUL byte would send
// Reserve into retries without end, and the CR would make every create
// "unreachable".
func TestWorkflowRefusesIDsOutsideTheRuleBeforeReserving(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	setStock(t, s, "P1", 10)
	cl := testenv.Temporal(t)
	in := workflows.PaymentInput{ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u1", CardType: "KB", CardNo: "1234-5678-9012-3456"}
	cases := map[string]workflows.PaymentInput{}
	bad := in
	bad.OrderID = testenv.ID("wf") // unique on the shared dev server
	bad.OrderID += strings.Repeat("x", 200-len(bad.OrderID))
	cases["200-character order id"] = bad
	bad = in
	bad.OrderID, bad.ProductID = testenv.ID("wf-nul"), "P1\x00"
	cases["NUL in product id"] = bad
	bad = in
	bad.OrderID, bad.UserID = testenv.ID("wf-cr"), "u\r"
	cases["CR in user id"] = bad
	// What the gateway would refuse with a 400 after the stock was held.
	bad = in
	short := testenv.ID("o")
	bad.OrderID = short[len(short)-5:]
	cases["5-character order id"] = bad
	want := map[string]string{}
	bad = in
	bad.OrderID, bad.CardType = testenv.ID("wf-card"), "VISA"
	cases["unknown card type"], want["unknown card type"] = bad, "cardType must be one of SAMSUNG, KB, HYUNDAI"
	bad = in
	bad.OrderID, bad.CardNo = testenv.ID("wf-cardno"), "1234"
	cases["malformed card number"], want["malformed card number"] = bad, "cardNo must look like dddd-dddd-dddd-dddd"
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(in.OrderID), TaskQueue: s.TaskQueue},
				workflows.PaymentWorkflowName, in)
			require.NoError(t, err)
			err = run.Get(ctx, nil)
			require.Error(t, err, "the workflow must refuse the order")
			require.NoError(t, ctx.Err(), "it must end at once, not retry")
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "an application error, got %v", err)
			assert.Equal(t, activities.ErrInvalidOrder, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			if w, ok := want[name]; ok {
				assert.Contains(t, appErr.Error(), w)
			} else {
				assert.Contains(t, appErr.Error(), anyRule)
			}

			iter := cl.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for iter.HasNext() {
				e, err := iter.Next()
				require.NoError(t, err)
				assert.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, e.GetEventType(), "no activity was scheduled")
			}
			_, err = s.Store.GetOrder(ctx, in.OrderID)
			assert.ErrorIs(t, err, store.ErrNotFound, "no order row")
		})
	}
	var orders int
	require.NoError(t, s.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&orders))
	assert.Zero(t, orders, "no order row")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 10}, stockOf(t, s, "P1"), "stock untouched")
	assert.Zero(t, s.Sim.Stats().Requests["create"], "nothing reached the gateway")
}
