package activities_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
)

// The real server tells a cancel request the workflow has not taken yet: a
// run on a task queue nobody polls never runs a task, so its cancel stays
// pending — what a create retried between the cancel and the workflow's
// next task sees (activities.Config.CancelRequested).
func TestCancelRequestedSeesACancelTheWorkflowHasNotTaken(t *testing.T) {
	t.Parallel()
	tc := testenv.Temporal(t)
	ctx := context.Background()
	id := testenv.ID("cancel-pending")
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: id + "-unpolled"}, "NeverRuns")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), id, "", "test done") })
	asked := activities.CancelRequestedBy(tc)

	requested, err := asked(ctx, id, run.GetRunID())
	require.NoError(t, err)
	assert.False(t, requested, "no cancel yet")

	require.NoError(t, tc.CancelWorkflow(ctx, id, run.GetRunID()))
	requested, err = asked(ctx, id, run.GetRunID())
	require.NoError(t, err)
	assert.True(t, requested, "the cancel is recorded before any task takes it")

	_, err = asked(ctx, id+"-nonesuch", "")
	assert.Error(t, err, "an unknown workflow is an error, never \"not cancelled\"")
}

// A create the server retried while its workflow has a cancel pending is
// held: nothing recorded, nothing sent, a retryable CreateHeldForCancel
// (the workflow's cancel ends it); a question that fails holds it too.
func TestCreateHeldWhileACancelIsPending(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	_, err := r.store.SetStock(t.Context(), "P1", 10)
	require.NoError(t, err)
	// The create activity of a worker whose Temporal answers hook.
	createWith := func(hook func(context.Context, string, string) (bool, error)) func(context.Context, activities.RequestInput) (activities.RequestResult, error) {
		acts := activities.New(r.store, r.client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway",
			CancelRequested: hook}, observer{r})
		r.env.RegisterActivity(acts)
		return acts.RequestPayment
	}
	for _, c := range []struct {
		order string
		hook  func(context.Context, string, string) (bool, error)
		kind  string
	}{
		{"order-1", func(context.Context, string, string) (bool, error) { return true, nil }, activities.ErrCancelRequested},
		{"order-2", func(context.Context, string, string) (bool, error) { return false, errors.New("server away") }, activities.ErrCancelUnknown},
	} {
		create := createWith(c.hook)
		r.reserve(t, c.order)
		_, err := r.env.ExecuteActivity(create, request(c.order))
		kind, retry := appError(t, err)
		assert.Equal(t, c.kind, kind, c.order)
		assert.True(t, retry, c.order)
		assert.Empty(t, r.attempts(t, c.order), "%s: nothing recorded", c.order)
	}
	assert.Zero(t, r.sim.Stats().Requests["create"], "the gateway saw no create")

	// No cancel pending: the create goes out.
	create := createWith(func(context.Context, string, string) (bool, error) { return false, nil })
	r.reserve(t, "order-3")
	_, err = r.env.ExecuteActivity(create, request("order-3"))
	require.NoError(t, err)
	assert.Equal(t, 1, r.sim.Stats().Orders["order-3"].CreateRequests)
}
