package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
)

// Refund is RefundWorkflow: it cancels (refunds) one charge that arrived
// after its order had already ended, retrying until the gateway agrees. A
// SUCCESS is never silently dropped (docs/design.md §2, step 6). With
// ReturnStock it refunds a CONFIRMED order's own charge at the customer's
// request, then records it and returns the stock together (§12).
func (w *Workflows) Refund(ctx workflow.Context, in RefundInput) (activities.CancelResult, error) {
	if in.OrderID == "" || in.TransactionKey == "" {
		return activities.CancelResult{}, temporal.NewNonRetryableApplicationError("refund needs an order id and a transaction key",
			activities.ErrInvalidOrder, nil)
	}
	what := "late charge"
	if in.ReturnStock {
		what = "order charge"
	}
	gatewayCtx := workflow.WithActivityOptions(ctx,
		cancelOptions(fmt.Sprintf("Refund %s %s of %d for order %s", what, in.TransactionKey, in.Amount, in.OrderID)))
	var res activities.CancelResult
	if err := workflow.ExecuteActivity(gatewayCtx, a.CancelPayments,
		activities.CancelInput{OrderID: in.OrderID, UserID: in.UserID, TransactionKeys: []string{in.TransactionKey}, Requested: in.ReturnStock}).
		Get(ctx, &res); err != nil {
		return res, err
	}
	if in.ReturnStock {
		return res, w.recordRefund(ctx, in, res)
	}
	// The payment's database options: the refund's once left out the
	// backoff coefficient (the SDK's default is the same 2) and the stock
	// refusals (which Settle and RecordEvent never return).
	storeCtx := workflow.WithActivityOptions(ctx,
		databaseOptions(fmt.Sprintf("Record refund of %s (amount %d) for order %s", in.TransactionKey, in.Amount, in.OrderID)))
	if err := workflow.ExecuteActivity(storeCtx, a.RecordEvent, activities.EventInput{OrderID: in.OrderID, Kind: activities.KindAnomaly,
		Cause: "late charge refunded: " + in.Cause, Detail: map[string]any{"transaction_key": in.TransactionKey, "refunded": res.Refunded}}).
		Get(ctx, nil); err != nil {
		return res, err
	}
	if in.MarkPayment {
		err := workflow.ExecuteActivity(storeCtx, a.Settle, activities.SettleInput{OrderID: in.OrderID, Payment: status.PaymentRefunded,
			Cause: "late charge refunded"}).Get(ctx, nil)
		if err != nil && !isType(err, activities.ErrIllegalTransition) {
			return res, err
		}
	}
	return res, nil
}

// recordRefund records a customer's refund, only as far as the gateway
// did it: the charge refunded, the payment REFUNDED and the stock returned
// in one step; a cancel that refunded nothing (the gateway knows no such
// charge, or holds it FAILED) records an anomaly, changes no books, and
// fails the refund, which a later request may then run again.
func (w *Workflows) recordRefund(ctx workflow.Context, in RefundInput, res activities.CancelResult) error {
	storeCtx := workflow.WithActivityOptions(ctx,
		databaseOptions(fmt.Sprintf("Record the refund of %s and return the stock of order %s", in.TransactionKey, in.OrderID)))
	if res.Refunded == 0 {
		statuses := make([]string, 0, len(res.Transactions))
		for _, tx := range res.Transactions {
			statuses = append(statuses, tx.TransactionKey+" "+tx.Status)
		}
		if err := workflow.ExecuteActivity(storeCtx, a.RecordEvent, activities.EventInput{OrderID: in.OrderID, Kind: activities.KindAnomaly,
			Cause:  "refund asked for; the gateway refunded nothing",
			Detail: map[string]any{"transaction_key": in.TransactionKey, "gateway": statuses}}).Get(ctx, nil); err != nil {
			return err
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the gateway refunded nothing of %s (%v): books unchanged",
			in.TransactionKey, statuses), ErrNothingRefunded, nil)
	}
	return workflow.ExecuteActivity(storeCtx, a.Settle, activities.SettleInput{OrderID: in.OrderID, Payment: status.PaymentRefunded,
		Reservation: activities.ReturnReservation, Cause: in.Cause}).Get(ctx, nil)
}
