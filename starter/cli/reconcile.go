package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/workflows"
)

// runReconcile runs one reconciliation sweep now, beside the schedule's,
// and waits for its summary (docs/design.md §10). Two sweeps at once are
// harmless: every fix is idempotent under its workflow id or the store's.
func runReconcile(ctx context.Context, args []string, env Env) error {
	c := newCommand("reconcile", env)
	since := c.fs.Duration("since", workflows.DefaultReconcileWindow, "check orders that ended within this window (open ones always)")
	dryRun := c.fs.Bool("dry-run", false, "only print what the sweep would fix: order, finding, action")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if *since <= 0 {
		return exitcode.UsageError(fmt.Errorf("reconcile: --since must be positive, got %s", *since))
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	kind := "now"
	if *dryRun {
		kind = "dry-run"
	}
	id := fmt.Sprintf("%s-%s-%d", config.ReconcileScheduleID(c.common.TaskQueue), kind, time.Now().UnixNano())
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: c.common.TaskQueue,
		StaticSummary: fmt.Sprintf("Reconciliation sweep (%s) over the last %s, from the starter", kind, *since)},
		workflows.ReconcileWorkflowName, workflows.ReconcileInput{Window: *since, DryRun: *dryRun})
	if err != nil {
		return fmt.Errorf("reconcile: start the sweep: %v", loadgen.RootCause(err))
	}
	if !*c.json {
		fmt.Fprintf(env.Stdout, "sweep %s started; waiting for it (is a worker running on task queue %s?)...\n", id, c.common.TaskQueue)
	}
	var res workflows.ReconcileResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("reconcile: sweep %s: %v", id, loadgen.RootCause(err))
	}
	return c.print(res, reconcileText(res))
}

// reconcileText is the sweep's summary as a table: order, finding, action
// (and, when not a dry run, what the action did).
func reconcileText(r workflows.ReconcileResult) string {
	var b strings.Builder
	mode := "fixed"
	if r.DryRun {
		mode = "dry run: nothing changed"
	}
	fmt.Fprintf(&b, "sweep over the last %s (%s): %d orders checked in %d batches, %d findings, %d left to their running workflow",
		r.Window, mode, r.Checked, r.Batches, len(r.Findings)+r.MoreFindings, r.Running)
	if r.SkippedBatches > 0 {
		fmt.Fprintf(&b, "\n%d batches skipped: the lookup breaker was open (nothing concluded for them)", r.SkippedBatches)
	}
	if r.Unlooked > 0 {
		fmt.Fprintf(&b, "\n%d orders not looked up (the gateway did not answer): left for the next sweep", r.Unlooked)
	}
	if len(r.Findings) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := "ORDER\tFINDING\tACTION\tTRANSACTION"
	if !r.DryRun {
		header += "\tRESULT"
	}
	fmt.Fprintln(tw, header)
	for _, f := range r.Findings {
		line := fmt.Sprintf("%s\t%s\t%s\t%s", f.OrderID, f.Finding, f.Action, orDash(f.TransactionKey))
		if !r.DryRun {
			line += "\t" + f.Result
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	if r.MoreFindings > 0 {
		fmt.Fprintf(&b, "... and %d more (see the counts in --json)", r.MoreFindings)
	}
	return strings.TrimRight(b.String(), "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
