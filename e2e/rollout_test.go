package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The two builds of the rollout test.
const (
	buildA = "rollout-a"
	buildB = "rollout-b"
	// buildBTimer is the summary of the timer build B's PaymentWorkflow
	// starts before anything else.
	buildBTimer = "build B's first step"
)

// registerBuildB registers the workflows as build B has them: its
// PaymentWorkflow first waits on a timer, then runs today's payment. That
// change is incompatible on purpose: a history build A wrote starts with
// another command, so replaying it on build B fails with a non-determinism
// error. The test proves no such replay happens.
func registerBuildB(r worker.WorkflowRegistry, t workflows.Tuning) {
	w := workflows.New(t)
	w.Register(r)
	opts := workflows.RegisterOptions(workflows.PaymentWorkflowName)
	opts.DisableAlreadyRegisteredCheck = true
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.PaymentInput) (workflows.State, error) {
		if err := workflow.NewTimerWithOptions(ctx, time.Millisecond, workflow.TimerOptions{Summary: buildBTimer}).Get(ctx, nil); err != nil {
			return workflows.State{}, err
		}
		return w.Payment(ctx, in)
	}, opts)
}

// A new build rolls out as docs/rollout.md says, with the starter's
// commands: build B's workers start beside build A's (A stays current),
// `deployment set-current` moves new orders to B, A's orders, already at
// the gateway, end on A's code, `deployment wait-drained` says when A may
// stop, and B alone takes the orders after it. Every order ends with its
// money and stock right, and no workflow task failed: B's change would have
// failed any A history replayed on it.
func TestRolloutKeepsOrdersOnTheBuildTheyStartedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.BuildID = buildA })
	setStock(t, s, "P1", 10)
	deploymentCmd := func(args ...string) string {
		t.Helper()
		out, err := starter(ctx, s, append([]string{"deployment"}, args...)...)
		require.NoError(t, err, out)
		return out
	}
	describe := func() deployment.Status { return deploymentStatus(t, s, "--grace", "1s") }
	require.Equal(t, buildA, describe().Current, "the first build became current on its own (--set-current auto)")

	onA := []string{"rollout-a-1", "rollout-a-2", "rollout-a-3"}
	for _, id := range onA {
		placeOrder(t, s, id, "P1", 1)
		waitOrder(t, s, id, status.OrderPending, 30*time.Second)
	}

	// 1. Start the new build's workers: A stays current.
	s.StartWorker(t, func(c *service.Config) { c.BuildID, c.RegisterWorkflows = buildB, registerBuildB })
	st := describe()
	assert.Equal(t, buildA, st.Current, "a second build does not take over on its own")
	b, ok := st.Build(buildB)
	require.True(t, ok, "build B registered: %+v", st)
	assert.Equal(t, deployment.RoleInactive, b.Role)
	testenv.Eventually(t, 10*time.Second, func() bool {
		a, _ := describe().Build(buildA)
		return a.RunningPinned == int64(len(onA))
	}, "build A's three orders counted as pinned to it")

	// 2. Make it current.
	var set cli.DeploymentSetCurrent
	require.NoError(t, json.Unmarshal([]byte(deploymentCmd("set-current", "--build-id", buildB, "--json")), &set))
	assert.Equal(t, cli.DeploymentSetCurrent{DeploymentName: s.Config.DeploymentName, BuildID: buildB, PreviousBuildID: buildA}, set)
	onB := []string{"rollout-b-1", "rollout-b-2"}
	for _, id := range onB {
		placeOrder(t, s, id, "P1", 1)
		waitOrder(t, s, id, status.OrderPending, 30*time.Second)
	}
	a, _ := describe().Build(buildA)
	assert.False(t, a.Drained, "build A still has pinned orders: %+v", a)

	// The gateway decides every order now, after the switch: A's orders
	// take their answers (callbacks, or polls for the one whose callback is
	// withheld) in new workflow tasks, which the server must give build A.
	orders := map[string]rolloutOrder{
		"rollout-a-1": {buildA, "SUCCESS", true, status.OrderConfirmed},
		"rollout-a-2": {buildA, "FAILED", true, status.OrderFailed},
		"rollout-a-3": {buildA, "SUCCESS", false, status.OrderConfirmed},
		"rollout-b-1": {buildB, "SUCCESS", true, status.OrderConfirmed},
		"rollout-b-2": {buildB, "FAILED", true, status.OrderFailed},
	}
	for id, o := range orders {
		o.decide(t, s, id)
	}

	// 3. Keep A's workers until its pinned runs drain, then stop them.
	out, err := starter(ctx, s, "deployment", "wait-drained", "--build-id", buildA, "--grace", "1s", "--timeout", "30s")
	require.NoError(t, err, out)
	require.NoError(t, s.Worker.Stop())
	orders["rollout-c-1"] = rolloutOrder{buildB, "SUCCESS", true, status.OrderConfirmed}
	placeOrder(t, s, "rollout-c-1", "P1", 1)
	waitOrder(t, s, "rollout-c-1", status.OrderPending, 30*time.Second)
	orders["rollout-c-1"].decide(t, s, "rollout-c-1")

	for id, d := range orders {
		build := d.build
		h := history(t, id)
		assert.Equal(t, build == buildB, startsWithBuildBTimer(h), "%s ran build %s's code from its first task", id, build)
		for _, e := range h {
			assert.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, e.GetEventType(), "%s: a workflow task failed: %v", id, e)
			if done := e.GetWorkflowTaskCompletedEventAttributes(); done != nil {
				assert.Equal(t, build, done.GetDeploymentVersion().GetBuildId(), "%s: task %d ran on its own build", id, e.GetEventId())
				assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, done.GetVersioningBehavior(), id)
			}
		}
		// The money: one create, one transaction, charged only when confirmed.
		st := s.Sim.Stats().Orders[id]
		assert.Equal(t, 1, st.CreateRequests, id)
		assert.Len(t, st.Transactions, 1, id)
		o, err := s.Store.GetOrder(ctx, id)
		require.NoError(t, err)
		if d.want == status.OrderConfirmed {
			assert.Equal(t, 1, st.Successful, id)
			assert.Equal(t, status.PaymentSuccess, o.PaymentStatus, id)
		} else {
			assert.Zero(t, st.Successful, id)
			assert.Equal(t, store.ReservationReleased, o.Reservation, "%s: its stock released", id)
		}
	}
	// The stock: four of ten sold (a-1, a-3, b-1, c-1), the failed two released.
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 6, Sold: 4}, stockOf(t, s, "P1"))
}

// rolloutOrder is an order of the rollout test: the build it starts on,
// the gateway's answer (status, and whether it calls back) and the order's
// end.
type rolloutOrder struct {
	build    string
	status   string
	callback bool
	want     status.Order
}

// decide answers the order at the gateway and waits for its end.
func (o rolloutOrder) decide(t *testing.T, s *testenv.Stack, orderID string) {
	t.Helper()
	got, err := s.Store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	testenv.Resolve(t, s.Sim, got.TransactionKey, o.status, "", o.callback)
	waitOrder(t, s, orderID, o.want, 30*time.Second)
}

// history is an order's workflow history.
func history(t *testing.T, orderID string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	iter := testenv.Temporal(t).GetWorkflowHistory(context.Background(), workflows.PaymentWorkflowID(orderID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		events = append(events, e)
	}
	return events
}

// startsWithBuildBTimer: the first command the run's first workflow task
// gave is build B's timer.
func startsWithBuildBTimer(events []*historypb.HistoryEvent) bool {
	for i, e := range events {
		if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED || i+1 == len(events) {
			continue
		}
		next := events[i+1]
		if next.GetEventType() != enumspb.EVENT_TYPE_TIMER_STARTED {
			return false
		}
		var summary string
		if p := next.GetUserMetadata().GetSummary(); p != nil {
			_ = testenv.Codec().DataConverter().FromPayload(p, &summary)
		}
		return summary == buildBTimer
	}
	return false
}
