package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// RecoverWorkflow acts only under the order's own workflow id, which the
// server refuses while the order's PaymentWorkflow runs (the ids collide).
// Started by a plaintext client under another id beside the live workflow,
// with the gateway refusing creates unprocessed (429: nothing may have
// reached it) and its lookups answering "nothing", it would compensate at
// once: the order CANCELLED, its stock released — a lost order. It refuses.
func TestARecoveryBesideALiveWorkflowIsRefused(t *testing.T) {
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
	// Under the order's own id, the server refuses it: the live workflow has it.
	_, err := raw.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(id), TaskQueue: s.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true}, workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: id})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	require.ErrorAs(t, err, &started, "a recovery under the order's id beside its live workflow")
	// Under any other id, it starts and refuses to act.
	run, err := raw.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "recover-elsewhere-" + id, TaskQueue: s.TaskQueue},
		workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: id})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runErr := run.Get(ctx, nil)
	require.Error(t, runErr, "a recovery under another id must refuse")
	var refused *temporal.ApplicationError
	require.ErrorAs(t, runErr, &refused)
	require.Equal(t, activities.ErrInvalidOrder, refused.Type(), "%v", runErr)
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
