package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the workflows under their public names.
func (w *Workflows) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(w.Payment, workflow.RegisterOptions{Name: PaymentWorkflowName})
	r.RegisterWorkflowWithOptions(w.Refund, workflow.RegisterOptions{Name: RefundWorkflowName})
	r.RegisterWorkflowWithOptions(w.Reconcile, workflow.RegisterOptions{Name: ReconcileWorkflowName})
	r.RegisterWorkflowWithOptions(w.Recover, workflow.RegisterOptions{Name: RecoverWorkflowName})
}
