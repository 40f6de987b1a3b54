package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// refundAllowed holds a RefundWorkflow's cancel to the books before it
// reaches the gateway. Whoever can write to the namespace can start that
// workflow with any input (the codec passes plaintext through), so its
// input is a claim, not the gateway's word: a late charge may be refunded
// only once its order has ended, and never the charge a CONFIRMED order
// stands on; a customer's refund only of exactly that charge. Other
// callers of CancelPayments (the order's own compensation) are not refunds.
func (a *Activities) refundAllowed(ctx context.Context, in CancelInput) error {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).WorkflowType == nil ||
		activity.GetInfo(ctx).WorkflowType.Name != RefundWorkflowType {
		return nil
	}
	o, err := a.store.GetOrder(ctx, in.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		return a.refuseRefund(ctx, in, "no such order")
	}
	if err != nil {
		return fmt.Errorf("read the order before its refund: %w", err)
	}
	own := o.Status == status.OrderConfirmed && len(in.TransactionKeys) == 1 && in.TransactionKeys[0] == o.TransactionKey
	switch {
	case in.SearchByOrder || len(in.TransactionKeys) != 1:
		return a.refuseRefund(ctx, in, "a refund names exactly one transaction")
	case in.Requested && !own:
		return a.refuseRefund(ctx, in, fmt.Sprintf("a customer's refund is of a CONFIRMED order's own charge; the order is %s", o.Status))
	case !in.Requested && !o.Status.Final():
		return a.refuseRefund(ctx, in, fmt.Sprintf("the order is still %s: its own workflow settles its charges", o.Status))
	case !in.Requested && own:
		return a.refuseRefund(ctx, in, "the order is CONFIRMED on this charge; only the customer's refund returns it")
	}
	return nil
}

func (a *Activities) refuseRefund(ctx context.Context, in CancelInput, why string) error {
	err := fmt.Errorf("refund of order %s refused: %s", in.OrderID, why)
	activity.GetLogger(ctx).Error("refund refused by the books", "order_id", in.OrderID, "transaction_keys", in.TransactionKeys, "reason", why)
	if rerr := a.store.RecordEvent(ctx, store.Event{OrderID: in.OrderID, Kind: store.KindAnomaly, Cause: "refund refused: " + why,
		Detail: map[string]any{"transaction_keys": in.TransactionKeys, "requested": in.Requested}}); rerr != nil && !errors.Is(rerr, store.ErrInvalid) &&
		!errors.Is(rerr, store.ErrNotFound) {
		return fmt.Errorf("record the refused refund: %w", rerr)
	}
	return nonRetryable(ErrRefundRefused, err)
}
