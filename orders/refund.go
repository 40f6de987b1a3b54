package orders

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// NotRefundableError refuses to refund an order that is not CONFIRMED
// with its charge taken (SUCCESS) or already refunded.
type NotRefundableError struct {
	OrderID string
	Status  status.Order
	Payment status.Payment
}

func (e *NotRefundableError) Error() string {
	return fmt.Sprintf("order %s is %s (payment %s): only a CONFIRMED order whose charge was taken can be refunded",
		e.OrderID, e.Status, e.Payment)
}

// Refund refunds a CONFIRMED order in full at the gateway and returns its
// stock (RefundWorkflow with ReturnStock), once: a repeat, or a refund
// already done, starts nothing new. It returns the refund's workflow id;
// with wait, once the refund is done.
func Refund(ctx context.Context, cl client.Client, st *store.Store, taskQueue, orderID string, wait bool) (string, error) {
	o, err := st.GetOrder(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w %q", ErrUnknownOrder, orderID)
	}
	if err != nil {
		return "", fmt.Errorf("refund %s: %v", orderID, err)
	}
	if o.Status != status.OrderConfirmed || o.TransactionKey == "" ||
		(o.PaymentStatus != status.PaymentSuccess && o.PaymentStatus != status.PaymentRefunded) {
		return "", &NotRefundableError{OrderID: orderID, Status: o.Status, Payment: o.PaymentStatus}
	}
	id := workflows.RefundWorkflowID(orderID, o.TransactionKey)
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue,
		// One refund per charge: a completed one is not run again, a running
		// one is the one a repeat waits for, and one that ended otherwise
		// (failed: the gateway refunded nothing; terminated) may run again,
		// as its steps are idempotent.
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("Refund order %s: charge %s of %d, stock returned", orderID, o.TransactionKey, o.Amount),
	}, workflows.RefundWorkflowName, workflows.RefundOrderInput(orderID, o.UserID, o.TransactionKey, o.Amount))
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) || temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		run = cl.GetWorkflow(ctx, id, "")
	} else if err != nil {
		return "", fmt.Errorf("refund %s: %v", orderID, loadgen.RootCause(err))
	}
	if wait {
		if err := run.Get(ctx, nil); err != nil {
			return id, fmt.Errorf("refund %s: %v", orderID, loadgen.RootCause(err))
		}
	}
	return id, nil
}
