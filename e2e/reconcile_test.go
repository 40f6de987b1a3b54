package e2e_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The reconciliation sweep (docs/design.md §10), one test per finding, each
// set up black-box on the real stack: a sweep fixes it, and a second sweep
// finds nothing.

// sweep runs `starter reconcile --json` and returns its summary.
func sweep(t *testing.T, s *testenv.Stack, args ...string) workflows.ReconcileResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := starter(ctx, s, append([]string{"reconcile", "--json"}, args...)...)
	require.NoError(t, err, out)
	var res workflows.ReconcileResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

// gatewayTx is the transaction as the gateway holds it now.
func gatewayTx(t *testing.T, s *testenv.Stack, key string) gateway.Transaction {
	t.Helper()
	g, err := gateway.New(gateway.Config{BaseURL: s.Sim.GatewayURL(), UserID: "user-1"})
	require.NoError(t, err)
	defer g.Close()
	tx, err := g.Payment(context.Background(), key)
	require.NoError(t, err)
	return tx
}

func onlyFinding(t *testing.T, res workflows.ReconcileResult) activities.Finding {
	t.Helper()
	require.Len(t, res.Findings, 1, "findings: %+v", res.Findings)
	return res.Findings[0]
}

// cancelledWithLateCharge: an order whose deadline passed (compensated,
// CANCELLED, its transaction cancelled), then charged at the gateway after
// all, with no callback — the lost late SUCCESS.
func cancelledWithLateCharge(t *testing.T, s *testenv.Stack, orderID string) store.Order {
	t.Helper()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, orderID, "P1", 1, "--deadline", "2s")
	o := waitOrder(t, s, orderID, status.OrderCancelled, 30*time.Second)
	require.NotEmpty(t, o.TransactionKey)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return !workflowOpen(t, orderID)
	}, "the order's workflow ended")
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", false)
	require.Equal(t, gateway.StatusSuccess, gatewayTx(t, s, o.TransactionKey).Status)
	return o
}

func workflowOpen(t *testing.T, orderID string) bool {
	t.Helper()
	d, err := testenv.Temporal(t).DescribeWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), "")
	require.NoError(t, err)
	return d.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() == nil
}

// A late SUCCESS on a CANCELLED order is refunded through RefundWorkflow;
// the dry run before it shows the table and changes nothing.
func TestReconcileRefundsLateSuccess(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	o := cancelledWithLateCharge(t, s, "rc-late")

	ctx := context.Background()
	out, err := starter(ctx, s, "reconcile", "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dry run: nothing changed")
	assert.Regexp(t, `ORDER\s+FINDING\s+ACTION\s+TRANSACTION`, out)
	assert.Regexp(t, `rc-late\s+late_success\s+refund\s+`+o.TransactionKey, out)
	require.Equal(t, gateway.StatusSuccess, gatewayTx(t, s, o.TransactionKey).Status, "a dry run refunds nothing")

	res := sweep(t, s)
	f := onlyFinding(t, res)
	assert.Equal(t, activities.FindingLateSuccess, f.Finding)
	assert.Equal(t, activities.ActionRefund, f.Action)
	assert.Equal(t, o.TransactionKey, f.TransactionKey)
	assert.Equal(t, workflows.ResultStarted, f.Result)

	testenv.Eventually(t, 30*time.Second, func() bool {
		got, err := s.Store.GetOrder(ctx, "rc-late")
		return err == nil && got.PaymentStatus == status.PaymentRefunded
	}, "payment REFUNDED")
	assert.Equal(t, gateway.StatusCancelled, gatewayTx(t, s, o.TransactionKey).Status)
	assert.Equal(t, 1, s.Sim.Stats().Orders["rc-late"].Refunded)
	assert.Equal(t, status.OrderCancelled, waitOrder(t, s, "rc-late", status.OrderCancelled, time.Second).Status)

	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
	assert.Equal(t, 1, s.Sim.Stats().Orders["rc-late"].Refunded, "refunded once")
	assert.Contains(t, metrics(t, s), metricnames.ReconcileFindings+`{action="refund",finding="late_success"} 1`)
	assert.Contains(t, metrics(t, s), metricnames.ReconcileLastSweep)
}

// A second SUCCESS on a CONFIRMED order (a charge made beside the order's
// own, its callback lost) is refunded; the order's own charge is not.
func TestReconcileRefundsSecondSuccess(t *testing.T) {
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-second", "P1", 1, "--wait")
	o := waitOrder(t, s, "rc-second", status.OrderConfirmed, 30*time.Second)

	g, err := gateway.New(gateway.Config{BaseURL: s.Sim.GatewayURL(), UserID: "user-1"})
	require.NoError(t, err)
	defer g.Close()
	// Its callback goes nowhere: lost.
	second, err := g.CreatePayment(ctx, gateway.CreateRequest{OrderID: "rc-second", Amount: 5000, CardType: "SAMSUNG",
		CardNo: "1234-5678-9814-1451", CallbackURL: "http://" + testenv.FreeAddr(t) + "/lost"}, "user-1", "")
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return gatewayTx(t, s, second.TransactionKey).Status == gateway.StatusSuccess
	}, "the second charge succeeded")

	f := onlyFinding(t, sweep(t, s))
	assert.Equal(t, activities.FindingSecondSuccess, f.Finding)
	assert.Equal(t, second.TransactionKey, f.TransactionKey)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return gatewayTx(t, s, second.TransactionKey).Status == gateway.StatusCancelled
	}, "the second charge refunded")
	assert.Equal(t, gateway.StatusSuccess, gatewayTx(t, s, o.TransactionKey).Status, "the order's own charge stands")
	got, err := s.Store.GetOrder(ctx, "rc-second")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, got.Status)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus)
	assert.Equal(t, o.TransactionKey, got.TransactionKey)

	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
}

// An order PENDING whose workflow was terminated, charged at the gateway
// with no callback: the sweep leaves it while its workflow runs, then,
// once it is gone, a recovery confirms it — without a second create.
func TestReconcileRecoversOrderWithoutWorkflow(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-gone", "P1", 2)
	o := waitOrder(t, s, "rc-gone", status.OrderPending, 30*time.Second)

	res := sweep(t, s)
	assert.Empty(t, res.Findings, "an order whose workflow runs is left to it")
	assert.Equal(t, 1, res.Running)

	require.NoError(t, testenv.Temporal(t).TerminateWorkflow(ctx, workflows.PaymentWorkflowID("rc-gone"), "", "test: workflow lost"))
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", false)

	f := onlyFinding(t, sweep(t, s))
	assert.Equal(t, activities.FindingWorkflowGone, f.Finding)
	assert.Equal(t, activities.ActionRecover, f.Action)
	assert.Equal(t, workflows.ResultStarted, f.Result)

	got := waitOrder(t, s, "rc-gone", status.OrderConfirmed, 30*time.Second)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus)
	assert.Equal(t, store.ReservationCommitted, got.Reservation)
	assert.Equal(t, int64(2), stockOf(t, s, "P1").Sold)
	assert.Equal(t, 1, s.Sim.Stats().Orders["rc-gone"].CreateRequests, "a recovery never creates")

	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
}

// An order PENDING whose workflow was terminated with nothing charged: the
// recovery compensates as the workflow would at its deadline.
func TestReconcileRecoveryCompensates(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-comp", "P1", 1, "--deadline", "5m")
	o := waitOrder(t, s, "rc-comp", status.OrderPending, 30*time.Second)
	require.NoError(t, testenv.Temporal(t).TerminateWorkflow(ctx, workflows.PaymentWorkflowID("rc-comp"), "", "test: workflow lost"))

	// The recovery's deadline is the default one from the order's
	// creation; the test cannot wait ten minutes, so it checks the
	// recovery took the order over and keeps its stock while the gateway
	// still says PENDING, then resolves FAILED at the gateway.
	f := onlyFinding(t, sweep(t, s))
	assert.Equal(t, activities.FindingWorkflowGone, f.Finding)
	assert.True(t, workflowOpen(t, "rc-comp"), "the recovery runs under the order's id")
	assert.Empty(t, sweep(t, s).Findings, "the recovery runs: nothing to find")
	assert.Equal(t, int64(1), stockOf(t, s, "P1").Reserved)

	testenv.Resolve(t, s.Sim, o.TransactionKey, "FAILED", "LIMIT_EXCEEDED", false)
	got := waitOrder(t, s, "rc-comp", status.OrderFailed, 30*time.Second)
	assert.Equal(t, store.ReservationReleased, got.Reservation)
	assert.Equal(t, int64(5), stockOf(t, s, "P1").Available)
	assert.Empty(t, sweep(t, s).Findings)
}

// A recovery keeps the order's own deadline (recorded by Reserve), not a
// default one: the gateway never answers, and the order is compensated when
// its own 20 s are up, not ten minutes after its creation.
func TestReconcileRecoveryKeepsTheOrdersOwnDeadline(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-deadline", "P1", 1, "--deadline", "20s")
	waitOrder(t, s, "rc-deadline", status.OrderPending, 30*time.Second)
	require.NoError(t, testenv.Temporal(t).TerminateWorkflow(ctx, workflows.PaymentWorkflowID("rc-deadline"), "", "test: workflow lost"))
	assert.Equal(t, activities.FindingWorkflowGone, onlyFinding(t, sweep(t, s)).Finding)

	got := waitOrder(t, s, "rc-deadline", status.OrderCancelled, time.Minute)
	assert.Equal(t, store.ReservationReleased, got.Reservation)
	assert.Equal(t, int64(5), stockOf(t, s, "P1").Available)
	assert.Empty(t, sweep(t, s).Findings)
}

// A final order whose stock is still HELD (here by a hand edit, as a bug
// or a manual fix could leave it) has it committed.
func TestReconcileSettlesHeldReservation(t *testing.T) {
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-held", "P1", 2, "--wait")
	waitOrder(t, s, "rc-held", status.OrderConfirmed, 30*time.Second)
	_, err := s.Store.Pool().Exec(ctx, `
		WITH r AS (UPDATE reservations SET state = 'HELD', settled_at = NULL WHERE order_id = 'rc-held' RETURNING quantity)
		UPDATE products SET sold = sold - (SELECT quantity FROM r), reserved = reserved + (SELECT quantity FROM r) WHERE product_id = 'P1'`)
	require.NoError(t, err)
	require.Equal(t, int64(2), stockOf(t, s, "P1").Reserved)

	f := onlyFinding(t, sweep(t, s))
	assert.Equal(t, activities.FindingReservationHeld, f.Finding)
	assert.Equal(t, activities.ActionCommit, f.Action)
	assert.Equal(t, workflows.ResultDone, f.Result)
	st := stockOf(t, s, "P1")
	assert.Equal(t, int64(0), st.Reserved)
	assert.Equal(t, int64(2), st.Sold)
	assert.Empty(t, sweep(t, s).Findings, "a second sweep finds nothing")
}

// A CONFIRMED order whose transaction the gateway now says FAILED is
// flagged once, and no money or stock moves.
func TestReconcileFlagsConfirmedUnpaid(t *testing.T) {
	s := testenv.NewStack(t, testenv.QuietFaults(), nil)
	ctx := context.Background()
	setStock(t, s, "P1", 5)
	placeOrder(t, s, "rc-flag", "P1", 1, "--wait")
	o := waitOrder(t, s, "rc-flag", status.OrderConfirmed, 30*time.Second)
	testenv.Resolve(t, s.Sim, o.TransactionKey, "FAILED", "", false)

	f := onlyFinding(t, sweep(t, s))
	assert.Equal(t, activities.FindingConfirmedUnpaid, f.Finding)
	assert.Equal(t, activities.ActionFlag, f.Action)
	assert.Equal(t, gateway.StatusFailed, f.GatewayStatus)
	events, err := s.Store.Events(ctx, "rc-flag")
	require.NoError(t, err)
	flagged := 0
	for _, e := range events {
		if e.Kind == store.KindAnomaly && e.Detail["finding"] == activities.FindingConfirmedUnpaid {
			flagged++
		}
	}
	assert.Equal(t, 1, flagged)
	got, err := s.Store.GetOrder(ctx, "rc-flag")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, got.Status)
	assert.Equal(t, status.PaymentSuccess, got.PaymentStatus)
	assert.Equal(t, int64(1), stockOf(t, s, "P1").Sold)

	res := sweep(t, s)
	assert.Empty(t, res.Findings, "flagged once")
	assert.Equal(t, 1, res.Flagged)
	assert.Contains(t, metrics(t, s), metricnames.ReconcileFindings+`{action="flag",finding="confirmed_unpaid"} 1`)
}

// With the gateway down a sweep concludes nothing and changes nothing; once
// it is back, the same sweep finds the late charge (so the setup was real).
func TestReconcileGatewayDownChangesNothing(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	o := cancelledWithLateCharge(t, s, "rc-down")
	testenv.PatchFaults(t, s.Sim, map[string]any{"down": true})

	res := sweep(t, s)
	assert.Empty(t, res.Findings)
	assert.Equal(t, 1, res.Unlooked+res.SkippedBatches, "the order was not judged: %+v", res)
	got, err := s.Store.GetOrder(context.Background(), "rc-down")
	require.NoError(t, err)
	assert.Equal(t, status.PaymentCancelled, got.PaymentStatus)
	_, err = testenv.Temporal(t).DescribeWorkflow(context.Background(), workflows.RefundWorkflowID("rc-down", o.TransactionKey), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "no refund started")

	testenv.PatchFaults(t, s.Sim, map[string]any{"down": false})
	assert.Equal(t, activities.FindingLateSuccess, onlyFinding(t, sweep(t, s, "--dry-run")).Finding)
}

// An open lookup breaker skips the batch: "cannot look" concludes nothing.
func TestReconcileOpenBreakerSkipsBatch(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.Breaker.OpenFor = time.Minute })
	cancelledWithLateCharge(t, s, "rc-open")
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	for range 10 {
		_, _ = s.Worker.Activities.LookupPayment(context.Background(), activities.LookupInput{OrderID: "rc-open"})
	}
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})

	res := sweep(t, s)
	assert.Empty(t, res.Findings)
	assert.Equal(t, 1, res.SkippedBatches)
}

// The schedule exists once the worker starts, and a restarted worker with
// other flags updates it rather than adding one; 0 pauses it.
func TestReconcileSchedule(t *testing.T) {
	s := testenv.NewStack(t, testenv.QuietFaults(), func(c *service.Config) { c.ReconcileInterval = time.Hour })
	ctx := context.Background()
	id := config.ReconcileScheduleID(s.TaskQueue)
	handle := testenv.Temporal(t).ScheduleClient().GetHandle(ctx, id)
	t.Cleanup(func() { _ = handle.Delete(context.Background()) })
	d, err := handle.Describe(ctx)
	require.NoError(t, err)
	require.Len(t, d.Schedule.Spec.Intervals, 1)
	assert.Equal(t, time.Hour, d.Schedule.Spec.Intervals[0].Every)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, d.Schedule.Policy.Overlap)

	restart := func(interval time.Duration) {
		cfg := s.Config
		cfg.ReconcileInterval = interval
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		cfg.Listener, cfg.HTTPAddr = l, l.Addr().String()
		w, err := service.Start(ctx, cfg, testenv.Logger(t))
		require.NoError(t, err)
		require.NoError(t, w.Stop())
	}
	restart(2 * time.Hour)
	d, err = handle.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, d.Schedule.Spec.Intervals[0].Every)
	assert.False(t, d.Schedule.State.Paused)
	assert.Len(t, schedulesNamed(t, id), 1, "updated, not duplicated")

	restart(0)
	d, err = handle.Describe(ctx)
	require.NoError(t, err)
	assert.True(t, d.Schedule.State.Paused, "--reconcile-interval 0 pauses it")
}

func schedulesNamed(t *testing.T, id string) []string {
	t.Helper()
	var found []string
	testenv.Eventually(t, 10*time.Second, func() bool {
		found = nil
		iter, err := testenv.Temporal(t).ScheduleClient().List(context.Background(), client.ScheduleListOptions{})
		require.NoError(t, err)
		for iter.HasNext() {
			e, err := iter.Next()
			require.NoError(t, err)
			if e.ID == id {
				found = append(found, e.ID)
			}
		}
		return len(found) > 0 // the list is eventually consistent
	}, "the schedule listed")
	return found
}
