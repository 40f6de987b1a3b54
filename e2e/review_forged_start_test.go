package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Review, issue 29's threat (a client of the namespace without the codec
// key: the codec passes plaintext payloads through) with a workflow start
// instead of a signal. RefundWorkflow believes its input: started under an
// id of the client's choosing, it cancels a CONFIRMED order's own charge at
// the gateway. The customer's money goes back, the goods stay sold, and the
// books still say CONFIRMED / SUCCESS: no token (§12), no customer's
// request, no check that the key is not the order's own confirmed charge
// (the callback endpoint and the sweep make that check; the workflow does
// not).
func TestReviewAForgedRefundStartRefundsAConfirmedOrdersOwnCharge(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	setStock(t, s, "P1", 5)
	const id = "rvw-forged-refund"
	placeOrder(t, s, id, "P1", 1)
	o := waitOrder(t, s, id, status.OrderConfirmed, 30*time.Second)
	require.NotEmpty(t, o.TransactionKey)

	raw := testenv.RawTemporal(t) // no codec key: a plaintext input
	run, err := raw.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "anything-" + id, TaskQueue: s.TaskQueue},
		workflows.RefundWorkflowName, workflows.RefundInput{OrderID: id, TransactionKey: o.TransactionKey, Amount: o.Amount, Cause: "forged"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runErr := run.Get(ctx, nil)
	t.Logf("forged refund ended: %v", runErr)

	got, err := s.Store.GetOrder(context.Background(), id)
	require.NoError(t, err)
	gw := s.Sim.Stats().Orders[id]
	t.Logf("books: %s / %s; gateway: successful %d, refunded %d", got.Status, got.PaymentStatus, gw.Successful, gw.Refunded)
	assert.Zero(t, gw.Refunded, "a start nobody authorised refunded the order's own charge at the gateway")
	assert.Equal(t, status.OrderConfirmed, got.Status)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus, "the books still say paid")
}

// Review, the same door: RecoverWorkflow started under an id that is not
// the order's own runs beside the order's live PaymentWorkflow. With the
// gateway refusing creates unprocessed (429, recorded UNREACHABLE: nothing
// may have reached it) and its lookups answering "nothing", the recovery
// compensates at once: the order is CANCELLED, its stock released, with
// no operator's cancel — a lost order — while the gateway is up and
// accepts the very next create.
func TestReviewAForgedRecoveryBesideALiveWorkflowCancelsTheOrder(t *testing.T) {
	t.Parallel()
	f := quietSlow()
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusTooManyRequests
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	const id = "rvw-forged-recover"
	placeOrder(t, s, id, "P1", 1, "--deadline", "2m")
	testenv.Eventually(t, 20*time.Second, func() bool {
		at, err := s.Store.Attempts(context.Background(), id)
		return err == nil && len(at) >= 1
	}, "the first create answered 429")

	raw := testenv.RawTemporal(t)
	run, err := raw.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "recover-elsewhere-" + id, TaskQueue: s.TaskQueue},
		workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: id})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runErr := run.Get(ctx, nil)
	t.Logf("forged recovery ended: %v", runErr)
	// The gateway stops refusing: the order's own workflow could now be charged.
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorRate": 0}})

	got, err := s.Store.GetOrder(context.Background(), id)
	require.NoError(t, err)
	events, err := s.Store.Events(context.Background(), id)
	require.NoError(t, err)
	cause := ""
	for _, e := range events {
		if e.To == string(status.OrderCancelled) {
			cause = e.Cause
		}
	}
	t.Logf("order %s / %s, cancelled because %q", got.Status, got.PaymentStatus, cause)
	assert.NotEqual(t, status.OrderCancelled, got.Status, "cancelled by a recovery nobody should have started: %s", cause)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 4, Reserved: 1}, stockOf(t, s, "P1"), "the stock held for the live order")
}
