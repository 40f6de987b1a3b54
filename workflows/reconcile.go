package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
)

// ReconcileWorkflow, the sweep that closes the gaps no single order's
// workflow can see (docs/design.md §10). It pages through the database, one
// batch per run, continuing as new between batches so that a million orders
// never make one huge history. What each batch finds is fixed by code that
// already exists: RefundWorkflow under its id rule (never twice), the
// order's own workflow id for a recovery (never beside a running workflow),
// the store's Settle for a reservation, an anomaly event for a disagreement
// no rule covers.

// sw is how workflow code names the sweep's activities.
var sw *activities.Sweeper

// ReconcileInput is one sweep. Since, Until, After and Summary are carried
// from batch to batch; a caller sets only Window and DryRun.
type ReconcileInput struct {
	// Window: final orders that changed within it are checked (open ones
	// always). DefaultReconcileWindow when zero.
	Window time.Duration `json:"window"`
	// DryRun finds and reports, and fixes nothing.
	DryRun    bool `json:"dryRun"`
	BatchSize int  `json:"batchSize,omitempty"` // DefaultReconcileBatch when zero

	Since   time.Time         `json:"since,omitempty"`
	Until   time.Time         `json:"until,omitempty"`
	After   activities.Cursor `json:"after"`
	Summary *ReconcileResult  `json:"summary,omitempty"`
}

// ReconcileResult is a sweep's summary: the workflow's result and its
// summary query, what the Temporal UI shows for each sweep.
type ReconcileResult struct {
	StartedAt  time.Time     `json:"startedAt"`
	FinishedAt time.Time     `json:"finishedAt,omitempty"`
	Took       time.Duration `json:"took"`
	Window     time.Duration `json:"window"`
	DryRun     bool          `json:"dryRun"`
	Batches    int           `json:"batches"`
	Checked    int           `json:"checked"`
	// SkippedBatches were not judged: the lookup breaker was open.
	SkippedBatches int                     `json:"skippedBatches"`
	Unlooked       int                     `json:"unlooked"` // orders whose lookup failed
	Running        int                     `json:"running"`  // orders left to their running workflow
	Flagged        int                     `json:"flagged"`  // disagreements flagged by an earlier sweep
	Counts         []activities.SweepCount `json:"counts"`
	// Findings are the first MaxReportedFindings findings; MoreFindings
	// counts the rest (Counts has them all).
	Findings     []activities.Finding `json:"findings"`
	MoreFindings int                  `json:"moreFindings,omitempty"`
}

// MaxReportedFindings bounds the findings a sweep's result lists, so its
// history stays small however much it finds.
const MaxReportedFindings = 500

// add counts a finding and keeps it for the report.
func (r *ReconcileResult) add(f activities.Finding) {
	if len(r.Findings) < MaxReportedFindings {
		r.Findings = append(r.Findings, f)
	} else {
		r.MoreFindings++
	}
	for i := range r.Counts {
		if r.Counts[i].Finding == f.Finding && r.Counts[i].Action == f.Action {
			r.Counts[i].N++
			return
		}
	}
	r.Counts = append(r.Counts, activities.SweepCount{Finding: f.Finding, Action: f.Action, N: 1})
}

// Reconcile is ReconcileWorkflow: one batch per run.
func (w *Workflows) Reconcile(ctx workflow.Context, in ReconcileInput) (ReconcileResult, error) {
	if in.Window < 0 || in.BatchSize < 0 {
		return ReconcileResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid sweep: window %s, batch size %d", in.Window, in.BatchSize), activities.ErrInvalidOrder, nil)
	}
	if in.Window == 0 {
		in.Window = DefaultReconcileWindow
	}
	if in.BatchSize == 0 {
		in.BatchSize = DefaultReconcileBatch
	}
	if in.Summary == nil {
		now := workflow.Now(ctx)
		in.Summary = &ReconcileResult{StartedAt: now, Window: in.Window, DryRun: in.DryRun,
			Counts: []activities.SweepCount{}, Findings: []activities.Finding{}}
		in.Since, in.Until = now.Add(-in.Window), now
	}
	sum := in.Summary
	if err := workflow.SetQueryHandler(ctx, SummaryQuery, func() (ReconcileResult, error) { return *sum, nil }); err != nil {
		return ReconcileResult{}, err
	}
	logger := workflow.GetLogger(ctx)

	batchCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A batch paces its lookups (--reconcile-rate): its timeout allows
		// for that; the heartbeat notices a worker that died under it.
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrInvalidOrder}},
		Summary: fmt.Sprintf("Compare %d orders after %s with Temporal and the gateway", in.BatchSize, in.After.OrderID),
	})
	var batch activities.SweepBatchResult
	if err := workflow.ExecuteActivity(batchCtx, sw.SweepBatch, activities.SweepBatchInput{Since: in.Since, Until: in.Until,
		After: in.After, Limit: in.BatchSize}).Get(ctx, &batch); err != nil {
		return *sum, err
	}
	sum.Batches++
	sum.Checked += batch.Checked
	sum.Unlooked += batch.Unlooked
	sum.Running += batch.Running
	sum.Flagged += batch.Flagged
	if batch.Skipped {
		sum.SkippedBatches++
		logger.Warn("lookup breaker open: batch skipped", "after", in.After.OrderID)
	}
	for _, f := range batch.Findings {
		if !in.DryRun {
			f.Result = fix(ctx, f)
		}
		logger.Info("reconcile finding", "order_id", f.OrderID, "finding", f.Finding, "action", f.Action, "result", f.Result)
		sum.add(f)
	}
	if !batch.Done {
		in.After = batch.Next
		return ReconcileResult{}, workflow.NewContinueAsNewError(ctx, ReconcileWorkflowName, in)
	}
	sum.FinishedAt = workflow.Now(ctx)
	sum.Took = sum.FinishedAt.Sub(sum.StartedAt)
	if !in.DryRun {
		doneCtx := workflow.WithActivityOptions(ctx, databaseOptions("Report the sweep to the worker's metrics"))
		doneCtx = workflow.WithRetryPolicy(doneCtx, temporal.RetryPolicy{MaximumAttempts: 3})
		if err := workflow.ExecuteActivity(doneCtx, sw.SweepDone, activities.SweepDoneInput{StartedAt: sum.StartedAt,
			Took: sum.Took, Counts: sum.Counts}).Get(ctx, nil); err != nil {
			logger.Warn("sweep metrics not reported", "error", err)
		}
	}
	return *sum, nil
}

// fix applies a finding's action and says how it went. A fix that cannot
// be made now is reported, not retried here: the next sweep finds it again.
func fix(ctx workflow.Context, f activities.Finding) string {
	cause := "reconciliation: " + f.Finding
	switch f.Action {
	case activities.ActionRefund:
		opts := workflow.ChildWorkflowOptions{
			WorkflowID:            RefundWorkflowID(f.OrderID, f.TransactionKey),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			StaticSummary:         fmt.Sprintf("Refund charge %s of %d for order %s (%s)", f.TransactionKey, f.Amount, f.OrderID, f.Finding),
		}
		return startChild(ctx, opts, RefundWorkflowName, RefundInput{OrderID: f.OrderID, UserID: f.UserID,
			TransactionKey: f.TransactionKey, Amount: f.Amount, Cause: cause, MarkPayment: f.Finding == activities.FindingLateSuccess})
	case activities.ActionRecover:
		opts := workflow.ChildWorkflowOptions{
			// The order's own id: while the recovery runs, callbacks reach
			// it, and no second workflow of the order can start beside it.
			WorkflowID:            PaymentWorkflowID(f.OrderID),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			StaticSummary:         fmt.Sprintf("Recover order %s (%s, workflow gone): look up, then settle or compensate", f.OrderID, f.OrderStatus),
		}
		return startChild(ctx, opts, RecoverWorkflowName, RecoverInput{OrderID: f.OrderID})
	case activities.ActionRelease, activities.ActionCommit:
		reservation := activities.ReleaseReservation
		if f.Action == activities.ActionCommit {
			reservation = activities.CommitReservation
		}
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx,
			databaseOptions(fmt.Sprintf("%s order %s's held stock (order %s)", f.Action, f.OrderID, f.OrderStatus))),
			a.Settle, activities.SettleInput{OrderID: f.OrderID, Reservation: reservation, Cause: cause}).Get(ctx, nil)
		return result(err)
	case activities.ActionFlag:
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx,
			databaseOptions(fmt.Sprintf("Flag order %s: CONFIRMED, gateway says %s", f.OrderID, f.GatewayStatus))),
			a.RecordEvent, activities.EventInput{OrderID: f.OrderID, Kind: activities.KindAnomaly,
				Cause:  fmt.Sprintf("reconciliation: order CONFIRMED but its transaction is %s at the gateway; money left as it is", f.GatewayStatus),
				Detail: map[string]any{"finding": f.Finding, "transaction_key": f.TransactionKey, "gateway_status": f.GatewayStatus}}).Get(ctx, nil)
		return result(err)
	}
	return "unknown action"
}

// Fix results (Finding.Result).
const (
	ResultDone           = "done"
	ResultStarted        = "started"
	ResultAlreadyStarted = "already started"
)

// startChild starts a child that outlives the sweep and waits only for its start.
func startChild(ctx workflow.Context, opts workflow.ChildWorkflowOptions, name string, in any) string {
	err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), name, in).GetChildWorkflowExecution().Get(ctx, nil)
	switch {
	case err == nil:
		return ResultStarted
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		return ResultAlreadyStarted
	}
	return "error: " + err.Error()
}

func result(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ResultDone
}
