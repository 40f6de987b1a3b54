package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// Reviews of the local create (money-safety version 3) on the real stack.
// The create now runs inside the workflow task that scheduled it, on a
// disconnected context, and that task may go on to end the workflow: the
// gateway's refusal is settled FAILED, an unreachable gateway compensated,
// all before the task completes. A task that does not complete is run again
// from its history, and its second run must decide as the first did.

// An operator's cancel arrives while the order's first create is on the
// wire, and the gateway refuses the create (4xx). The workflow task that
// reserved the stock and sent the create settles the refusal — Settle
// commits FAILED and releases the stock — and tries to complete the
// workflow, which the server refuses while the cancel request waits. The
// task is run again from a history with no marker of Reserve or the create
// in it, where the cancel is there before Reserve's local activity answers.
//
// Money and stock come out right whatever happens (nothing was charged,
// nothing is held); the workflow must not fail, and its search attributes
// must end saying what the database says.
func TestOperatorCancelDuringARefusedLocalCreateEndsTheOrderOnce(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusBadRequest
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.ReadTimeout, c.PollInitial, c.PollMax = 10*time.Second, time.Minute, time.Minute
	})
	setStock(t, s, 5)
	const orderID = "lcre-0001"
	placeOrder(t, s, orderID)
	onTheWire(t, s.Store, orderID, nil, "create on the wire")
	// The task has run for well under its 8 s heartbeat: the server holds
	// the request until the task completes.
	cancelARefusedCreate(t, s, orderID, 1)
}

// The same on a granted re-send: create #1's outcome is unknown (a 500),
// the order is looked up and nothing found after the grace period, and the
// task that receives that lookup's answer sends create #2 locally. The
// gateway refuses #2 (4xx) while an operator's cancel waits: that task
// settles FAILED and tries to complete the workflow, which the server
// refuses; its second run has the lookup's answer and the cancel together
// and no record of #2.
func TestOperatorCancelDuringARefusedLocalReSendEndsTheOrderOnce(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Create.FailNext, f.Create.ErrorStatus = 1, http.StatusInternalServerError
	s := testenv.NewStack(t, f, func(c *service.Config) { c.ReadTimeout = 10 * time.Second })
	setStock(t, s, 5)
	ctx := context.Background()
	const orderID = "lcre-0004"
	placeOrder(t, s, orderID)
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) == 1 && list[0].Outcome == store.OutcomeUnknown
	}, "create #1 outcome unknown")
	testenv.PatchFaults(t, s.Sim, map[string]any{"latency": map[string]any{"min": "3s", "max": "3s"},
		"create": map[string]any{"failNext": 1, "errorStatus": http.StatusBadRequest}})
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) == 2 && list[1].State == "SENDING"
	}, "granted create #2 on the wire")
	cancelARefusedCreate(t, s, orderID, 2)
}

// cancelARefusedCreate cancels the order while its refused create is on
// the wire and checks how it ended: FAILED or CANCELLED, the stock back,
// nothing charged, every create sent counted, the workflow not failed, and
// its OrderStatus as the database has it.
func cancelARefusedCreate(t *testing.T, s *testenv.Stack, orderID string, creates int) {
	t.Helper()
	ctx := context.Background()
	tc := temporalClient(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))

	runErr := waitWorkflow(t, tc, id)
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	t.Logf("workflow ended: %v; order %s payment %s reservation %s", runErr, got.Status, got.PaymentStatus, got.Reservation)
	t.Logf("history:\n%s", historySummary(t, tc, id))
	assert.Contains(t, []status.Order{status.OrderFailed, status.OrderCancelled}, got.Status)
	assert.Equal(t, store.ReservationReleased, got.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
	assert.Zero(t, s.Sim.Stats().Orders[orderID].Successful, "nothing was charged")
	assert.Equal(t, creates, s.Sim.Stats().Orders[orderID].CreateRequests, "creates sent, all refused")
	assert.NoError(t, nonFailure(runErr), "after the stock is reserved the workflow never fails")
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()),
		"the closed workflow's OrderStatus says what the database says")
}

// An operator's cancel arrives between two local tries of the create: the
// gateway's port was closed for the first try (UNREACHABLE: nothing
// charged), and it opens right after the cancel. The design's promise for
// the create is that a cancel stops it between tries (version 1's regular
// activity does so); the local tries run on a disconnected context and
// cannot see the cancel until their workflow task completes, so each later
// try is a new charge sent after the operator cancelled the order (then
// cancelled or refunded by the compensation, or confirmed if its callback
// comes with the cancel). The test holds that no create reaches the gateway
// after the cancel, and that money and stock end together whatever happened.
func TestOperatorCancelBetweenLocalCreateTriesSendsNoCreateAfterIt(t *testing.T) {
	t.Parallel()
	f := processing(100 * time.Millisecond)
	f.Down = true
	s := testenv.NewStack(t, f, func(c *service.Config) {
		// Five creates allowed: the local tries, 0.5 to 4 s apart, may all send.
		c.RequestAttempts, c.PollInitial, c.PollMax = 5, time.Minute, time.Minute
	})
	setStock(t, s, 5)
	ctx := context.Background()
	const orderID = "lcre-0002"
	placeOrder(t, s, orderID)
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) >= 1 && list[0].Outcome == store.OutcomeUnreachable
	}, "first create refused at the dial")
	tc := temporalClient(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))
	atCancel, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	// The gateway opens once a create has been tried after the cancel was
	// sent (still refused at the dial: nothing reached it), or once the
	// workflow code has seen the cancel (its compensation needs the gateway
	// to end): from then on, a create that reaches the gateway was begun
	// after the operator's cancel.
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) > len(atCancel) || cancelSeen(t, tc, id)
	}, "a create tried after the cancel, or the cancel seen by the workflow")
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})

	checkMoneyAndStock(t, s, tc, orderID)
	attempts, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	for _, at := range attempts {
		t.Logf("create #%d %s %s at %s", at.No, at.State, at.Outcome, at.SentAt.Format(time.RFC3339Nano))
	}
	t.Logf("history:\n%s", historySummary(t, tc, id))
	assert.Zero(t, s.Sim.Stats().Orders[orderID].CreateRequests,
		"a create reached the gateway after the operator's cancel (%d creates recorded when it was sent, %d in all)", len(atCancel), len(attempts))
}

// The same cancel while the create is on the wire and the gateway accepts
// it (and decides SUCCESS before it answers). Pins the behaviour the design
// promises for a cancel during the local create: it waits for the answer,
// then the order ends one way with money and stock together — CONFIRMED
// (the callback in hand is settled) or CANCELLED with the charge refunded —
// and with exactly one create sent.
func TestOperatorCancelWhileTheLocalCreateIsOnTheWireKeepsMoneyAndStockTogether(t *testing.T) {
	t.Parallel()
	f := processing(100 * time.Millisecond)
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.ReadTimeout, c.PollInitial, c.PollMax = 10*time.Second, time.Minute, time.Minute
	})
	setStock(t, s, 5)
	ctx := context.Background()
	const orderID = "lcre-0003"
	placeOrder(t, s, orderID)
	onTheWire(t, s.Store, orderID, nil, "create on the wire")
	tc := temporalClient(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))

	checkMoneyAndStock(t, s, tc, orderID)
	assert.Equal(t, 1, s.Sim.Stats().Orders[orderID].CreateRequests, "one create")
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()),
		"the closed workflow's OrderStatus says what the database says")
}

// cancelSeen: a workflow task completed after the workflow's cancel
// request, so the workflow code has seen it.
func cancelSeen(t *testing.T, tc client.Client, id string) bool {
	iter := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	requested := false
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			requested = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if requested {
				return true
			}
		}
	}
	return false
}

// waitWorkflow waits for the workflow to close and returns how it ended.
func waitWorkflow(t *testing.T, tc client.Client, id string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
	require.NoError(t, ctx.Err(), "workflow %s still running", id)
	return err
}

// searchAttribute reads a keyword search attribute of a workflow as the
// server holds it (its mutable state, not the visibility store).
func searchAttribute(t *testing.T, tc client.Client, id, name string) string {
	t.Helper()
	desc, err := tc.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	p, ok := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[name]
	if !ok {
		return ""
	}
	var v string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
	return v
}

// historySummary lists a workflow's events by type, one a line, with the
// cause of a failed workflow task.
func historySummary(t *testing.T, tc client.Client, id string) string {
	t.Helper()
	var out string
	iter := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		line := e.GetEventType().String()
		if f := e.GetWorkflowTaskFailedEventAttributes(); f != nil {
			line += " " + f.GetCause().String()
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil {
			line += " " + m.GetMarkerName()
		}
		out += "  " + line + "\n"
	}
	return out
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
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusTooManyRequests
	s := testenv.NewStack(t, f, func(c *service.Config) {
		c.RequestAttempts, c.ReadTimeout, c.PollInitial, c.PollMax = 5, 4*time.Second, time.Minute, time.Minute
	})
	setStock(t, s, 5)
	ctx := context.Background()
	const orderID = "lcre-0005"
	placeOrder(t, s, orderID)
	tc := temporalClient(t)
	id := workflows.PaymentWorkflowID(orderID)
	runErr := waitWorkflow(t, tc, id)
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	history := historySummary(t, tc, id)
	t.Logf("workflow ended: %v; order %s payment %s reservation %s\nhistory:\n%s", runErr, got.Status, got.PaymentStatus, got.Reservation, history)
	assert.NoError(t, runErr)
	assert.Equal(t, status.OrderCancelled, got.Status)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock(t, s))
	assert.Equal(t, 5, s.Sim.Stats().Orders[orderID].CreateRequests, "five creates, none processed")
	attempts, err := s.Store.Attempts(ctx, orderID)
	require.NoError(t, err)
	assert.Len(t, attempts, 5)
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()))
	assert.Contains(t, history, "MarkerRecorded LocalActivity\n  UpsertWorkflowSearchAttributes\n  ActivityTaskScheduled",
		"one local try (after Reserve's), then the regular activity, with REQUESTING published before it")
}
