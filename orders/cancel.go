package orders

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// ErrUnknownOrder is an order no workflow was ever started for.
var ErrUnknownOrder = errors.New("unknown order")

// EndedError refuses to cancel an order whose workflow has ended.
type EndedError struct {
	OrderID string
	Status  status.Order
	// Workflow is how the workflow ended, in Temporal's words (completed).
	Workflow string
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("order %s already ended (%s, workflow %s): nothing to cancel", e.OrderID, e.Status, e.Workflow)
}

// Cancel is the operator's cancel: it asks the order's running workflow to
// compensate and, with wait, returns once it has. view reads the order's
// status for an EndedError.
func Cancel(ctx context.Context, cl client.Client, orderID string, wait bool, view func(context.Context) View) error {
	id := workflows.PaymentWorkflowID(orderID)
	desc, err := cl.DescribeWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return fmt.Errorf("%w %q", ErrUnknownOrder, orderID)
	}
	if err != nil {
		return fmt.Errorf("cancel %s: %v", orderID, loadgen.RootCause(err))
	}
	if st := desc.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return &EndedError{OrderID: orderID, Status: view(ctx).Status, Workflow: strings.ToLower(st.String())}
	}
	if err := cl.CancelWorkflow(ctx, id, ""); err != nil {
		return fmt.Errorf("cancel %s: %v", orderID, loadgen.RootCause(err))
	}
	if !wait {
		return nil
	}
	err = cl.GetWorkflow(ctx, id, "").Get(ctx, nil)
	var canceled *temporal.CanceledError
	if err != nil && !errors.As(err, &canceled) {
		return fmt.Errorf("cancel %s: %v", orderID, loadgen.RootCause(err))
	}
	return nil
}
