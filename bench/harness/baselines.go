package harness

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The baselines, what payguard's rate is set against, both on their own
// task queue, served by a worker inside the bench process with the SDK's
// default options, started for each of their steps only:
//   - no-op (BenchNoopOrder): a happy-path order's shape (Reserve,
//     RequestPayment, Settle; the callback a signal, not an activity) of
//     activities that do nothing;
//   - minimal (BenchMinimalOrder): the least a durable callback-driven
//     payment asks of Temporal: a local activity, a wait for one signal
//     (sent right after the start, as the gateway's callback would be), a
//     local activity, done. It is the headline's divisor: the limit.
//
// Both end with a confirmed order's State, so that the load generator
// follows them as it follows payguard's orders.
const (
	baselineTaskQueue   = "payguard-bench-noop"
	noopWorkflowName    = "BenchNoopOrder"
	minimalWorkflowName = "BenchMinimalOrder"
	noopActivityName    = "BenchNoop"
	// minimalCallback is the signal the minimal workflow waits for.
	minimalCallback = "callback"
	// happyPathActivities is how many activities a happy-path order runs.
	happyPathActivities = 3
)

// noopInput is the no-op workflow's one argument.
type noopInput struct {
	Activities int `json:"activities"`
}

var confirmedState = workflows.State{Status: status.OrderConfirmed}

func noopWorkflow(ctx workflow.Context, in noopInput) (workflows.State, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for range in.Activities {
		if err := workflow.ExecuteActivity(ctx, noopActivityName).Get(ctx, nil); err != nil {
			return workflows.State{}, err
		}
	}
	return confirmedState, nil
}

func minimalWorkflow(ctx workflow.Context) (workflows.State, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	if err := workflow.ExecuteLocalActivity(ctx, noopActivity).Get(ctx, nil); err != nil {
		return workflows.State{}, err
	}
	workflow.GetSignalChannel(ctx, minimalCallback).Receive(ctx, nil)
	if err := workflow.ExecuteLocalActivity(ctx, noopActivity).Get(ctx, nil); err != nil {
		return workflows.State{}, err
	}
	return confirmedState, nil
}

func noopActivity(context.Context) error { return nil }

// startBaselineWorker serves both baselines until stopped.
func startBaselineWorker(cl client.Client) (worker.Worker, error) {
	w := worker.New(cl, baselineTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(noopWorkflow, workflow.RegisterOptions{Name: noopWorkflowName})
	w.RegisterWorkflowWithOptions(minimalWorkflow, workflow.RegisterOptions{Name: minimalWorkflowName})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: noopActivityName})
	return w, w.Start()
}

// placeNoop and placeMinimal start a baseline workflow under the order's
// workflow id, where the load generator follows it; the minimal one's
// callback is signalled as soon as it started.
func placeNoop(cl client.Client) place {
	return func(ctx context.Context, in workflows.PaymentInput) error {
		_, err := cl.ExecuteWorkflow(ctx, baselineStart(in), noopWorkflowName, noopInput{Activities: happyPathActivities})
		return err
	}
}

func placeMinimal(cl client.Client) place {
	return func(ctx context.Context, in workflows.PaymentInput) error {
		run, err := cl.ExecuteWorkflow(ctx, baselineStart(in), minimalWorkflowName)
		if err != nil {
			return err
		}
		return cl.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), minimalCallback, nil)
	}
}

func baselineStart(in workflows.PaymentInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID(in.OrderID), TaskQueue: baselineTaskQueue}
}
