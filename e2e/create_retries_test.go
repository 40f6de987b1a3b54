package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The create's retries: a keyed create whose first outcome is unknown is
// looked up whatever its retries then meet, and tries after the first go
// on as a regular activity.

// Key mode: create #1 reaches the gateway (a transaction is made) but its
// answer times out (UNKNOWN, keyed: retried). The gateway then goes down: #2
// and #3 are UNREACHABLE. That proves nothing about #1: the order must be
// looked up, never compensated as "nothing was charged" while #1 charges the
// card (its callback is lost).
func TestKeyedUnknownThenUnreachableIsStillLookedUp(t *testing.T) {
	t.Parallel()
	keyedUnknownThen(t, "key-down", map[string]any{"down": true})
}

// The same with a 429 (rate limited, answered before the gateway looks at
// the key) on the keyed retries: never "payment failed" while #1 may charge.
func TestKeyedUnknownThen429IsStillLookedUp(t *testing.T) {
	t.Parallel()
	keyedUnknownThen(t, "key-429", map[string]any{"create": map[string]any{"failNext": 5, "errorStatus": 429}})
}

func keyedUnknownThen(t *testing.T, orderID string, fault map[string]any) {
	f := testenv.Processing(300 * time.Millisecond)
	f.Callback.DropRate = 1
	f.Create.TimeoutRate = 1
	f.Create.TimeoutDelay = simulator.Duration(10 * time.Second)
	s := testenv.NewStack(t, f, func(c *service.Config) { c.IdempotencyKeys = true })
	setStock(t, s, "P1", 5)
	placeOrder(t, s, orderID, "P1", 2)
	testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders[orderID].CreateRequests >= 1 }, "create #1 at the gateway")
	require.Equal(t, http.StatusOK, testenv.Admin(t, s.Sim, http.MethodPatch, "/admin/faults", fault, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The gateway heals once the create's budget is spent, so the order can
	// be looked up.
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) == 3 && list[2].State == "ANSWERED"
	}, "three creates answered")
	require.Equal(t, http.StatusOK, testenv.Admin(t, s.Sim, http.MethodPatch, "/admin/faults",
		map[string]any{"down": false, "create": map[string]any{"failNext": 0, "errorStatus": 500}}, nil))

	tc := testenv.Temporal(t)
	var st workflows.State
	require.NoError(t, tc.GetWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "").Get(ctx, &st))

	o, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	attempts, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	for _, a := range attempts {
		t.Logf("attempt #%d %s %s", a.No, a.Outcome, a.Detail)
	}
	gw := s.Sim.Stats().Orders[orderID]
	t.Logf("order %s payment %s; gateway: %+v", o.Status, o.PaymentStatus, gw)
	assert.Equal(t, status.OrderConfirmed, o.Status, "the charge #1 made is found and confirms the order")
	assert.Equal(t, 1, gw.Successful)
	assert.Len(t, gw.Transactions, 1, "one transaction whatever was retried under the key")
}

// A create the gateway answers 429 (not processed: as unreachable, safe to
// retry) on every try, after 3 s each. The local create gets one try; the
// rest go on as a regular activity, which an operator's cancel could stop
// between tries. The order ends as the design says for a gateway that never
// took a create: CANCELLED, nothing to cancel, stock released, five
// creates, the workflow not failed and its search attributes saying what
// the database says.
func TestCreateRetriesAfterItsLocalTryGoOnAsARegularActivity(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Latency = slowAnswers
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusTooManyRequests
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.RequestAttempts, c.ReadTimeout, c.PollInitial, c.PollMax = 5, 4*time.Second, time.Minute, time.Minute
		c.UnknownGrace = 5 * time.Second // above the read timeout
	})
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	const orderID = "lcre-0005"
	placeOrder(t, s, orderID, "P1", 2)
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	runErr := workflowEnd(t, tc, id, 60*time.Second)
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	history := historySummary(t, tc, id)
	t.Logf("workflow ended: %v; order %s payment %s reservation %s\nhistory:\n%s", runErr, got.Status, got.PaymentStatus, got.Reservation, history)
	assert.NoError(t, runErr)
	assert.Equal(t, status.OrderCancelled, got.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Equal(t, 5, s.Sim.Stats().Orders[orderID].CreateRequests, "five creates, none processed")
	attempts, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	assert.Len(t, attempts, 5)
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()))
	assert.Contains(t, history, "MarkerRecorded LocalActivity\n  UpsertWorkflowSearchAttributes\n  ActivityTaskScheduled",
		"one local try (after Reserve's), then the regular activity, with REQUESTING published before it")
}
