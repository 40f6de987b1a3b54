package runner

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/workflows"
)

// I4's "still running at the end" names the payments and refunds left
// open, not a scheduled reconcile sweep that happened to begin as the run
// ended (seed 9 on 2026-12-04, the 13:25:00 sweep).
func TestStillRunningIsPaymentsAndRefunds(t *testing.T) {
	testenv.NeedsServices(t, "Temporal")
	cl := testenv.Temporal(t)
	ctx := context.Background()
	suffix := time.Now().Format("150405.000000")
	// No worker polls this queue: both stay running.
	queue := "still-running-" + suffix
	payment := "order-still-running-" + suffix
	reconcile := "payguard-reconcile-still-running-" + suffix
	for _, w := range []struct{ id, typ string }{{reconcile, workflows.ReconcileWorkflowName}, {payment, workflows.PaymentWorkflowName}} {
		id := w.id
		_, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, w.typ)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.TerminateWorkflow(context.Background(), id, "", "test over") })
	}
	var running []string
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		_, running, err = readTemporal(ctx, cl, nil)
		require.NoError(t, err)
		return slices.Contains(running, payment)
	}, "the open payment listed")
	assert.NotContains(t, running, reconcile, "a reconcile sweep is not an order left open")
}
