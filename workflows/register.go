package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the workflows under their public names, each with its
// versioning behaviour (RegisterOptions).
func (w *Workflows) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(w.Payment, RegisterOptions(PaymentWorkflowName))
	r.RegisterWorkflowWithOptions(w.Refund, RegisterOptions(RefundWorkflowName))
	r.RegisterWorkflowWithOptions(w.Reconcile, RegisterOptions(ReconcileWorkflowName))
	r.RegisterWorkflowWithOptions(w.Recover, RegisterOptions(RecoverWorkflowName))
}

// versioningBehaviors say which build runs a workflow's later tasks
// (docs/rollout.md). A payment or a refund is pinned: it ends on the build
// it started on, so a change to its code never meets a history the old
// code wrote, and it needs no GetVersion branch; it ends within its
// deadline, so the old build drains. The sweep and its recoveries move to
// the current build at their next task: a sweep is short and starts anew
// from its schedule, and a recovery must run the fix the current build has.
var versioningBehaviors = map[string]workflow.VersioningBehavior{
	PaymentWorkflowName:   workflow.VersioningBehaviorPinned,
	RefundWorkflowName:    workflow.VersioningBehaviorPinned,
	ReconcileWorkflowName: workflow.VersioningBehaviorAutoUpgrade,
	RecoverWorkflowName:   workflow.VersioningBehaviorAutoUpgrade,
}

// RegisterOptions are the options workflow name is registered with: its
// public name and its versioning behaviour (unspecified for a name that is
// not payguard's, which a versioned worker refuses to register).
func RegisterOptions(name string) workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: name, VersioningBehavior: versioningBehaviors[name]}
}
