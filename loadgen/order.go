package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// Order is what each order of a run looks like (the starter's `order` flags).
type Order struct {
	Product  string
	Qty      int64
	Amount   int64
	User     string
	CardType string
	CardNo   string
	Deadline time.Duration
}

// Validate refuses an order the workflow or the gateway would refuse, naming
// the starter's flags.
func (f *Order) Validate() error {
	switch {
	case f.Product == "":
		return errors.New("--product is required")
	case f.Qty <= 0:
		return fmt.Errorf("--qty must be at least 1, got %d", f.Qty)
	case f.Amount <= 0:
		return fmt.Errorf("--amount must be positive (minor units), got %d", f.Amount)
	case f.Deadline <= 0 || f.Deadline > workflows.MaxDeadline:
		return fmt.Errorf("--deadline must be positive and at most %s, got %s", workflows.MaxDeadline, f.Deadline)
	}
	// Refused here, before a workflow starts: the workflow would refuse them
	// too, but only after the start, with a failed workflow to show for it.
	if err := ids.CheckProduct(f.Product); err != nil {
		return fmt.Errorf("--product: %w", err)
	}
	if err := ids.CheckUser(f.User); err != nil {
		return fmt.Errorf("--user: %w", err)
	}
	return checkCard(f.CardType, f.CardNo)
}

// Input is the workflow input of this order under orderID.
func (f *Order) Input(orderID string) workflows.PaymentInput {
	return workflows.PaymentInput{OrderID: orderID, ProductID: f.Product, Quantity: f.Qty, Amount: f.Amount, UserID: f.User,
		CardType: f.CardType, CardNo: f.CardNo, Deadline: f.Deadline}
}

// AlreadyPlacedError refuses a second start of an order.
type AlreadyPlacedError struct{ OrderID string }

func (e *AlreadyPlacedError) Error() string {
	return fmt.Sprintf("order %s was already placed (workflow %s): one order, one payment; see `starter status %s`",
		e.OrderID, workflows.PaymentWorkflowID(e.OrderID), e.OrderID)
}

// StartOrder starts an order's workflow; starting an order twice is
// refused with an AlreadyPlacedError.
func StartOrder(ctx context.Context, cl client.Client, taskQueue string, in workflows.PaymentInput) (client.WorkflowRun, error) {
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.PaymentWorkflowID(in.OrderID),
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the client hands back the running order as if new.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            fmt.Sprintf("Order %s: %d × %s for %d", in.OrderID, in.Quantity, in.ProductID, in.Amount),
		StaticDetails: fmt.Sprintf("Order **%s** by %s: %d × %s, amount %d, %s card, deadline %s.",
			in.OrderID, in.UserID, in.Quantity, in.ProductID, in.Amount, in.CardType, in.Deadline),
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.OrderStatusKey.ValueSet(string(status.OrderReserving))),
	}, workflows.PaymentWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) || temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return nil, &AlreadyPlacedError{OrderID: in.OrderID}
	}
	if err != nil {
		return nil, fmt.Errorf("start order %s: %v", in.OrderID, RootCause(err))
	}
	return run, nil
}

func checkCard(cardType, cardNo string) error {
	if !slices.Contains(gateway.CardTypes, cardType) {
		return fmt.Errorf("--card-type must be one of %s, got %q", strings.Join(gateway.CardTypes, ", "), cardType)
	}
	if !gateway.CardNoPattern.MatchString(cardNo) {
		return fmt.Errorf("--card-no must look like dddd-dddd-dddd-dddd, got %d characters ending %s", len(cardNo), gateway.MaskCardNo(cardNo))
	}
	return nil
}

// NewOrderID is a fresh random order id: 128 bits, so that two doors
// generating ids never pick one twice.
func NewOrderID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "ord-" + hex.EncodeToString(b)
}

// RootCause is the innermost of err's chain: the SDK wraps a dial or start
// failure in layers a person need not read.
func RootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
