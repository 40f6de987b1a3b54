package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// An operator's cancel while the order's create is under way. The create
// runs inside the workflow task that scheduled it, and that task may go on
// to end the workflow (a refusal settled FAILED, an unreachable gateway
// compensated) before it completes; a task that does not complete is run
// again from its history, and its second run must decide as the first did.

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
	f.Latency = slowAnswers
	f.Create.ErrorRate, f.Create.ErrorStatus = 1, http.StatusBadRequest
	s := testenv.NewStack(t, f, waitsForTheAnswer)
	setStock(t, s, "P1", 5)
	const orderID = "lcre-0001"
	placeOrder(t, s, orderID, "P1", 2)
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
	s := testenv.NewStack(t, f, func(c *service.Config) { c.ReadTimeout, c.UnknownGrace = 10*time.Second, 11*time.Second })
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	const orderID = "lcre-0004"
	placeOrder(t, s, orderID, "P1", 2)
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
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))

	runErr := workflowEnd(t, tc, id, 60*time.Second)
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	t.Logf("workflow ended: %v; order %s payment %s reservation %s", runErr, got.Status, got.PaymentStatus, got.Reservation)
	t.Logf("history:\n%s", historySummary(t, tc, id))
	assert.Contains(t, []status.Order{status.OrderFailed, status.OrderCancelled}, got.Status)
	assert.Equal(t, store.ReservationReleased, got.Reservation)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
	assert.Zero(t, s.Sim.Stats().Orders[orderID].Successful, "nothing was charged")
	assert.Equal(t, creates, s.Sim.Stats().Orders[orderID].CreateRequests, "creates sent, all refused")
	assert.NoError(t, nonFailure(runErr), "after the stock is reserved the workflow never fails")
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()),
		"the closed workflow's OrderStatus says what the database says")
}

// An operator's cancel arrives between two local tries of the create: the
// gateway's port was closed for the first try (UNREACHABLE: nothing
// charged), and it opens right after the cancel. The design promises that
// a cancel stops the create between tries; the local tries run on a
// disconnected context and cannot see the cancel until their workflow task
// completes, so a later try would be a new charge sent after the operator
// cancelled the order. The test holds that no create reaches the gateway
// after the cancel, and that money and stock end together whatever happened.
func TestOperatorCancelBetweenLocalCreateTriesSendsNoCreateAfterIt(t *testing.T) {
	t.Parallel()
	f := testenv.Processing(100 * time.Millisecond)
	f.Down = true
	s := testenv.NewStack(t, f, func(c *service.Config) {
		// Five creates allowed: the local tries, 0.5 to 4 s apart, may all send.
		c.RequestAttempts, c.PollInitial, c.PollMax = 5, time.Minute, time.Minute
	})
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	const orderID = "lcre-0002"
	placeOrder(t, s, orderID, "P1", 2)
	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := s.Store.Attempts(ctx, orderID)
		return err == nil && len(list) >= 1 && list[0].Outcome == store.OutcomeUnreachable
	}, "first create refused at the dial")
	tc := testenv.Temporal(t)
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
	f := testenv.Processing(100 * time.Millisecond)
	f.Latency = slowAnswers
	s := testenv.NewStack(t, f, waitsForTheAnswer)
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	const orderID = "lcre-0003"
	placeOrder(t, s, orderID, "P1", 2)
	onTheWire(t, s.Store, orderID, nil, "create on the wire")
	tc := testenv.Temporal(t)
	id := workflows.PaymentWorkflowID(orderID)
	require.NoError(t, tc.CancelWorkflow(ctx, id, ""))

	checkMoneyAndStock(t, s, tc, orderID)
	assert.Equal(t, 1, s.Sim.Stats().Orders[orderID].CreateRequests, "one create")
	got, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	assert.Equal(t, string(got.Status), searchAttribute(t, tc, id, workflows.OrderStatusKey.GetName()),
		"the closed workflow's OrderStatus says what the database says")
}

// An operator cancels while the create is in flight and the gateway answers
// 4xx: the refusal is recorded (payment FAILED), and the order must end
// FAILED with its stock released — not a failed workflow with the order
// REQUESTING and the stock HELD for ever (compensation asking for the
// illegal FAILED -> CANCELLED), nor a workflow ended cancelled over a FAILED
// order (the task that settled the refusal is refused its completion while
// the cancel waits, and its run again from the history meets the cancel
// first: that run must end as the refusal did).
func TestCancelDuringARejectedCreateReleasesTheStock(t *testing.T) {
	t.Parallel()
	f := testenv.Processing(time.Hour)
	f.Create.FailNext = 1
	f.Create.ErrorStatus = 400
	s := testenv.NewStack(t, f, nil)
	setStock(t, s, "P1", 5)
	ctx := context.Background()
	release := testenv.BlockWrites(t, s.Store.Pool(), "INSERT", "payment_attempts")

	orderID := testenv.ID("rej")
	placeOrder(t, s, orderID, "P1", 2)
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", "the create blocked as it starts")
	// CancelWorkflow returns once the server has recorded the cancel (the
	// starter's cancel would then query the workflow, which waits for the
	// task the create runs in). The create is a local activity, so the
	// workflow sees the cancel only when that task
	// completes — with the create's answer, or in a run of the task again
	// from its history. The create is released now, well inside its timeout;
	// waiting for the cancel to show in the history would wait for the task's
	// heartbeat, past that timeout.
	tc := testenv.Temporal(t)
	require.NoError(t, tc.CancelWorkflow(ctx, workflows.PaymentWorkflowID(orderID), ""))
	release()

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	werr := tc.GetWorkflow(waitCtx, workflows.PaymentWorkflowID(orderID), "").Get(waitCtx, nil)
	t.Logf("workflow ended: %v", werr)
	assert.True(t, cancelSeen(t, tc, workflows.PaymentWorkflowID(orderID)), "the workflow saw the cancel:\n%s", historySummary(t, tc, workflows.PaymentWorkflowID(orderID)))
	o, err := s.Store.GetOrder(ctx, orderID)
	require.NoError(t, err)
	assert.NoError(t, werr, "the refusal settles the order FAILED, cancel or not")
	assert.Equal(t, status.OrderFailed, o.Status, "payment %s", o.PaymentStatus)
	assert.NotEqual(t, store.ReservationHeld, o.Reservation, "stock held with no workflow")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stockOf(t, s, "P1"))
}
