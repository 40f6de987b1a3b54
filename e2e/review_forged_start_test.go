package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
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
