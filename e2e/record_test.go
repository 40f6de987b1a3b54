package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// TestRecordReplayHistories re-records workflows/testdata from real runs of
// each path of PaymentWorkflow. It is a tool, not a check: it runs only with
// PAYGUARD_RECORD_HISTORIES=1 (`make record-histories`); the replay tests in
// workflows/ then check every change against what it recorded.
func TestRecordReplayHistories(t *testing.T) {
	if os.Getenv("PAYGUARD_RECORD_HISTORIES") != "1" {
		t.Skip("recording tool: run `make record-histories`")
	}
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) {
		c.PollInitial, c.PollMax = 500*time.Millisecond, time.Second
		c.Breaker = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5, OpenFor: 2 * time.Second, HalfOpenCalls: 1}
	})
	setStock(t, s, "P1", 100)
	ctx := context.Background()
	keyOf := func(orderID string) string {
		testenv.Eventually(t, 30*time.Second, func() bool { return len(s.Sim.Stats().Orders[orderID].Transactions) > 0 }, "transaction of "+orderID)
		return s.Sim.Stats().Orders[orderID].Transactions[0]
	}
	resolve := func(orderID, st string, callback bool) {
		testenv.Resolve(t, s.Sim, keyOf(orderID), st, "", callback)
	}
	// sweepID is the newest sweep's workflow id: a sweep is started by the
	// starter under an id of its own, not the order's.
	var sweepID, refundID string
	paths := []struct {
		name string
		run  func(orderID string)
		want status.Order
	}{
		{"callback_success", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", true)
		}, status.OrderConfirmed},
		{"poll_success", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", false)
		}, status.OrderConfirmed},
		{"callback_failed", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "FAILED", true)
		}, status.OrderFailed},
		{"rejected", func(id string) {
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"failNext": 1, "errorStatus": 400}})
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderFailed, 30*time.Second)
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorStatus": 500}})
		}, status.OrderFailed},
		{"out_of_stock", func(id string) { placeOrder(t, s, id, "P1", 1000) }, status.OrderRejected},
		{"unknown_then_found", func(id string) {
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"timeoutRate": 1, "timeoutDelay": "5s"}})
			placeOrder(t, s, id, "P1", 1)
			testenv.Eventually(t, 30*time.Second, func() bool {
				o, err := s.Store.GetOrder(ctx, id)
				return err == nil && o.PaymentStatus != status.PaymentRequested && o.PaymentStatus != ""
			}, "create answered")
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})
			resolve(id, "SUCCESS", false)
		}, status.OrderConfirmed},
		// A poll refused by the open lookup breaker, then the charge found.
		{"breaker_open_then_success", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
			testenv.Eventually(t, 60*time.Second, func() bool {
				st := workflowState(t, s, id)
				return st.LastLookup != nil && st.LastLookup.Result == "UNAVAILABLE"
			}, "a poll refused by the open breaker")
			testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
			resolve(id, "SUCCESS", false)
		}, status.OrderConfirmed},
		// RecoverWorkflow, under the order's own workflow id (the recorded
		// run is the last one, the recovery's): the order's workflow was
		// terminated, a sweep found it, the charge landed without callback.
		{"recovery_success", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			require.NoError(t, testenv.Temporal(t).TerminateWorkflow(ctx, workflows.PaymentWorkflowID(id), "", "recording: workflow lost"))
			out, err := starter(ctx, s, "reconcile", "--json")
			require.NoError(t, err, out)
			resolve(id, "SUCCESS", false)
		}, status.OrderConfirmed},
		// RecoverWorkflow over an order already final (a second sweep's
		// recovery, after the first's ended it): it publishes the order's
		// statuses and ends.
		{"recovery_of_final_order", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", true)
			waitOrder(t, s, id, status.OrderConfirmed, 30*time.Second)
			require.NoError(t, testenv.Temporal(t).GetWorkflow(ctx, workflows.PaymentWorkflowID(id), "").Get(ctx, nil))
			_, err := testenv.Temporal(t).ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(id),
				TaskQueue: s.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
				workflows.RecoverWorkflowName, workflows.RecoverInput{OrderID: id})
			require.NoError(t, err)
		}, status.OrderConfirmed},
		// ReconcileWorkflow: a sweep (over a confirmed order, among the
		// recordings' others), recorded under the sweep's own id.
		{"reconcile_sweep", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", true)
			waitOrder(t, s, id, status.OrderConfirmed, 30*time.Second)
			out, err := starter(ctx, s, "reconcile", "--json")
			require.NoError(t, err, out)
			list, err := testenv.Temporal(t).ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: "default", Query: "WorkflowType = 'ReconcileWorkflow'"})
			require.NoError(t, err)
			require.NotEmpty(t, list.Executions)
			sweepID = list.Executions[0].Execution.WorkflowId
		}, status.OrderConfirmed},
		// RefundWorkflow refunding a CONFIRMED order in full at the
		// customer's request (starter refund), recorded under its own id.
		{"refund_order", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", true)
			waitOrder(t, s, id, status.OrderConfirmed, 30*time.Second)
			out, err := starter(ctx, s, "refund", id, "--json")
			require.NoError(t, err, out)
			refundID = workflows.RefundWorkflowID(id, keyOf(id))
		}, status.OrderConfirmed},
		{"deadline_compensation", func(id string) {
			placeOrder(t, s, id, "P1", 1, "--deadline", "3s")
		}, status.OrderCancelled},
		{"operator_cancel", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			_, err := starter(ctx, s, "cancel", id)
			require.NoError(t, err)
		}, status.OrderCancelled},
		{"resend_after_grace", func(id string) {
			// A 500 before the gateway created anything: unknown, then
			// nothing found after the grace period, then one granted re-send.
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"failNext": 1, "errorStatus": 500}})
			placeOrder(t, s, id, "P1", 1)
			testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders[id].CreateRequests == 2 }, "re-sent")
			resolve(id, "SUCCESS", true)
		}, status.OrderConfirmed},
		{"create_waits_for_database", func(id string) {
			heal := testenv.FailFirst(t, s.Store.Pool(), 3, "INSERT", "payment_attempts", "")
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			heal()
			resolve(id, "SUCCESS", true)
		}, status.OrderConfirmed},
		{"cancel_during_reserve", func(id string) {
			release := testenv.HoldRows(t, s.Store.Pool(), `SELECT * FROM products WHERE product_id = 'P1' FOR UPDATE`)
			defer release()
			placeOrder(t, s, id, "P1", 1)
			testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "", "Reserve blocked")
			_, err := starter(ctx, s, "cancel", id, "--wait=false")
			require.NoError(t, err)
			// Reserve is a local activity: the cancel reaches the history
			// when the task running it heartbeats, before Reserve answers.
			testenv.Eventually(t, 30*time.Second, func() bool {
				return testenv.HistoryHas(t, workflows.PaymentWorkflowID(id), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED)
			}, "the cancel in the history while Reserve is blocked")
		}, status.OrderCancelled},
		// The database refuses the Settle's write past its five local tries:
		// it goes on as a regular activity.
		{"settle_outlasts_local_tries", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			testenv.FailFirst(t, s.Store.Pool(), 6, "UPDATE", "reservations", "")
			resolve(id, "SUCCESS", true)
		}, status.OrderConfirmed},
		// The database refuses the create's attempt row on its local try and
		// the regular activity's first four: the create goes on as a regular
		// activity, still sent once.
		{"create_outlasts_local_tries", func(id string) {
			heal := testenv.FailFirst(t, s.Store.Pool(), 6, "INSERT", "payment_attempts", "")
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 60*time.Second)
			heal()
			require.Equal(t, 1, s.Sim.Stats().Orders[id].CreateRequests)
			resolve(id, "SUCCESS", true)
		}, status.OrderConfirmed},
		// An operator's cancel while the first create is blocked in the
		// database, which the gateway then refuses: the task that settled
		// the refusal is refused its completion while the cancel waits, and
		// its run again learns from Reserve that the order ended FAILED
		// and ends it so, completed.
		{"cancel_during_refused_create", func(id string) {
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"failNext": 1, "errorStatus": 400}})
			release := testenv.BlockWrites(t, s.Store.Pool(), "INSERT", "payment_attempts")
			placeOrder(t, s, id, "P1", 1)
			testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", "the create blocked")
			require.NoError(t, testenv.Temporal(t).CancelWorkflow(ctx, workflows.PaymentWorkflowID(id), ""))
			release()
			waitOrder(t, s, id, status.OrderFailed, 30*time.Second)
			testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorStatus": 500}})
		}, status.OrderFailed},
		// An unsigned callback's hint (the worker's --callback-auth lookup
		// sends this signal): the charge succeeded without a callback, and
		// the hint's lookup, not the next poll, confirms it.
		{"lookup_hint", func(id string) {
			placeOrder(t, s, id, "P1", 1)
			waitOrder(t, s, id, status.OrderPending, 30*time.Second)
			resolve(id, "SUCCESS", false)
			require.NoError(t, testenv.Temporal(t).SignalWorkflow(ctx, workflows.PaymentWorkflowID(id), "", workflows.LookupHintSignal,
				workflows.LookupHint{TransactionKey: keyOf(id), Status: "SUCCESS"}))
		}, status.OrderConfirmed},
		// Started directly, as the starter refuses such an id itself; the
		// workflow fails before Reserve, so there is no order row to wait for.
		{"invalid_id_refused", func(id string) {
			in := workflows.PaymentInput{OrderID: strings.Repeat("x", 200), ProductID: "P1", Quantity: 1, Amount: 5000,
				UserID: "user-1", CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451"}
			_, err := testenv.Temporal(t).ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(id),
				TaskQueue: s.TaskQueue}, workflows.PaymentWorkflowName, in)
			require.NoError(t, err)
		}, ""},
	}
	root, err := devserver.ModuleRoot()
	require.NoError(t, err)
	cliPath, err := devserver.TemporalCLI()
	require.NoError(t, err)
	// PAYGUARD_RECORD_ONLY=a,b records only those paths, leaving the other
	// histories as they were recorded.
	only := os.Getenv("PAYGUARD_RECORD_ONLY")
	for _, p := range paths {
		if only != "" && !slices.Contains(strings.Split(only, ","), p.name) {
			continue
		}
		id := "replay-" + p.name
		p.run(id)
		if p.want != "" {
			waitOrder(t, s, id, p.want, 60*time.Second)
		}
		wfID := workflows.PaymentWorkflowID(id)
		switch p.name {
		case "reconcile_sweep":
			wfID = sweepID
		case "refund_order":
			wfID = refundID
		}
		// Waits until the workflow has closed, however it ended.
		_ = testenv.Temporal(t).GetWorkflow(ctx, wfID, "").Get(ctx, nil)
		out, err := exec.Command(cliPath, "workflow", "show", "--workflow-id", wfID,
			"--output", "json", "--address", s.Config.TemporalAddress, "--namespace", "default").Output()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "workflows", "testdata", p.name+".json"), out, 0o644))
		t.Logf("recorded %s", p.name)
	}
}
