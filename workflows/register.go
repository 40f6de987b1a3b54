package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
)

// a is how workflow code names activities: only its method values are used.
var a *activities.Activities

// Workflows carries the worker's tuning into the workflows it registers.
type Workflows struct {
	tuning Tuning
}

// New returns the workflows with the given tuning.
func New(t Tuning) *Workflows { return &Workflows{tuning: t} }

// Register registers the workflows under their public names.
func (w *Workflows) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(w.Payment, workflow.RegisterOptions{Name: PaymentWorkflowName})
	r.RegisterWorkflowWithOptions(w.Refund, workflow.RegisterOptions{Name: RefundWorkflowName})
	r.RegisterWorkflowWithOptions(w.Reconcile, workflow.RegisterOptions{Name: ReconcileWorkflowName})
	r.RegisterWorkflowWithOptions(w.Recover, workflow.RegisterOptions{Name: RecoverWorkflowName})
}
