package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// A RefundWorkflow's input is a claim: whoever can write to the namespace
// can start one, in plaintext, under any id. Its cancel is held to the
// books before it reaches the gateway, so a start that would refund a
// CONFIRMED order's own charge (goods sold, money back, books still
// CONFIRMED) is refused, and the charge stays.
func TestAForgedRefundOfAConfirmedOrdersOwnChargeIsRefused(t *testing.T) {
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
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, runErr, &appErr, "the forged refund must fail, not refund")
	assert.Equal(t, activities.ErrRefundRefused, appErr.Type())

	got, err := s.Store.GetOrder(context.Background(), id)
	require.NoError(t, err)
	gw := s.Sim.Stats().Orders[id]
	t.Logf("books: %s / %s; gateway: successful %d, refunded %d", got.Status, got.PaymentStatus, gw.Successful, gw.Refunded)
	assert.Zero(t, gw.Refunded, "a start nobody authorised refunded the order's own charge at the gateway")
	assert.Equal(t, status.OrderConfirmed, got.Status)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus, "the books still say paid")
}
