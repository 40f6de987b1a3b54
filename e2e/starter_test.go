package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The starter's commands against a running worker: status, cancel, stock,
// callback, load, and the errors it gives before starting anything.

func TestStarterCallbackIsAccepted(t *testing.T) {
	t.Parallel()
	s, _ := pendingOrder(t, "cli-cb")
	out, err := starter(context.Background(), s, "callback", "cli-cb", "--status", "SUCCESS", "--json")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"accepted": true`)
	waitOrder(t, s, "cli-cb", status.OrderConfirmed, 30*time.Second)
}

func TestStockCommands(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	out, err := starter(context.Background(), s, "stock", "set", "P9", "7", "--json")
	require.NoError(t, err)
	assert.JSONEq(t, `{"productId":"P9","total":7,"available":7,"reserved":0,"sold":0}`, out)
	out, err = starter(context.Background(), s, "stock", "show", "P9")
	require.NoError(t, err)
	assert.Equal(t, "P9: total 7, available 7, reserved 0, sold 0", out)
	_, err = starter(context.Background(), s, "stock", "show", "nope")
	assert.ErrorContains(t, err, "unknown product")
}

func TestSecondStartOfTheSameOrderIsRefused(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "dup-0001", "P1", 2)
	_, err := starter(context.Background(), s, "order", "--product", "P1", "--amount", "5000", "--order-id", "dup-0001")
	assert.ErrorContains(t, err, "already placed")
	waitOrder(t, s, "dup-0001", status.OrderPending, 30*time.Second)
	assert.Equal(t, 1, s.Sim.Stats().Orders["dup-0001"].CreateRequests)
}

func TestLoadCommandSummarises(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(100*time.Millisecond), nil)
	out, err := starter(context.Background(), s, "load", "--rate", "10", "--duration", "1s", "--stock", "100", "--metrics-url", s.MetricsURL(), "--json")
	require.NoError(t, err)
	var sum loadgen.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	assert.Equal(t, 10, sum.Started)
	assert.Zero(t, sum.FailedToStart)
	assert.Equal(t, map[string]int{"CONFIRMED": 10}, sum.Final)
	assert.Equal(t, 10, sum.FinalLatency.Count)
	assert.Greater(t, sum.FinalLatency.P50, 0.0)
	st := stockOf(t, s, "P1")
	assert.Equal(t, int64(10), st.Sold)
	table := sum.Table()
	assert.Contains(t, table, "orders_started")
	assert.Contains(t, table, "latency_final_status")
}

func TestStatusSaysWhatItCouldNotReach(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "half-1", "P1", 2)
	waitOrder(t, s, "half-1", status.OrderPending, 30*time.Second)
	out, err := starter(context.Background(), s, "status", "half-1", "--json", "--temporal-address", testenv.FreeAddr(t))
	require.NoError(t, err, "the database alone still answers")
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, status.OrderPending, v.Status)
	assert.Equal(t, "ok", v.Sources["database"])
	assert.Contains(t, v.Sources["workflow"], "unreachable")
}

// A workflow task running a local activity — here the create, blocked in
// the database — holds a state query until it completes (the create's
// timeout, or the task's heartbeat). status and cancel --wait=false show the
// database's view without waiting for it, and say why the workflow's part
// is missing.
func TestStatusDoesNotWaitForABusyWorkflowTask(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	setStock(t, s, "P1", 5)
	release := testenv.BlockWrites(t, s.Store.Pool(), "INSERT", "payment_attempts")
	orderID := testenv.ID("busy")
	placeOrder(t, s, orderID, "P1", 2)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", "the create blocked as it starts")

	for i, args := range [][]string{{"status", orderID, "--json"}, {"cancel", orderID, "--wait=false", "--json"}} {
		v, out := orderView(t, s, args...)
		t.Logf("%v: %s", args, out)
		assert.Equal(t, "ok", v.Sources["database"], "%v", args)
		if i == 0 {
			assert.Contains(t, v.Sources["workflow"], "busy", "%v: the query waited for the task", args)
		} else {
			// Seconds later the worker may be heartbeating the task (it
			// completes it and starts the next around the local activity
			// still running), and a query between the two is answered.
			assert.Regexp(t, "^(busy|ok)", v.Sources["workflow"], "%v", args)
		}
		assert.Equal(t, status.OrderRequesting, v.Status, "%v: the database's view", args)
	}
	release()
	tc := testenv.Temporal(t)
	_ = workflowEnd(t, tc, workflows.PaymentWorkflowID(orderID), 60*time.Second)
	o, err := s.Store.GetOrder(context.Background(), orderID)
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status, "the cancel took")
}
