package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
)

// reserve holds the order's stock. ended reports that the order ended here
// (rejected, cancelled, or ended by an earlier run of this task: recall),
// with the run's result.
func (p *payment) reserve(ctx workflow.Context) (ended bool, st State, err error) {
	p.setStatus(ctx, status.OrderReserving, "")
	summary := fmt.Sprintf("Reserve %d × %s for order %s (amount %d)", p.in.Quantity, p.in.ProductID, p.in.OrderID, p.in.Amount)
	in := activities.ReserveInput{OrderID: p.in.OrderID, ProductID: p.in.ProductID, Quantity: p.in.Quantity, Amount: p.in.Amount,
		UserID: p.in.UserID, Deadline: p.state.Deadline}
	// An operator's cancel must not compensate while Reserve may still
	// commit, or the stock it holds would stay held with no workflow; and a
	// cancelled local activity's future resolves at once, whatever its
	// statement goes on to do. So Reserve runs where the cancel cannot reach.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var held activities.ReserveResult
	err = p.dbStep(dctx, summary, a.Reserve, in).Get(ctx, &held)
	if err == nil && held.Attempts > 0 {
		if ended, st, err := p.recall(ctx, held); ended {
			return true, st, err
		}
	}
	rejected := isType(err, activities.ErrOutOfStock, activities.ErrUnknownProduct)
	switch {
	case ctx.Err() != nil && !rejected:
		st, err = p.cancelled(ctx)
		return true, st, err
	case rejected:
		p.state.Reason = errorType(err)
		p.setStatus(ctx, status.OrderRejected, "")
		p.log.Info("order rejected", "reason", p.state.Reason)
		return true, p.state, nil
	case err != nil:
		return true, p.state, err
	}
	return false, p.state, nil
}

// recall takes up what an earlier run of this, the first workflow task,
// left in the database: Reserve's answer is the order as the database holds
// it, and a run of the first task again (its worker died, or the server
// refused to close the workflow while a signal or a cancel waited) has no
// marker of what the first run did. The creates it began are counted, and
// an order it ended ends so again, before an operator's cancel is looked
// at, as an answer in hand does (cancelTakes): CONFIRMED keeps its charge,
// FAILED is not waited on, and neither is settled again (the store did
// that; after a reset to this task the payment may since have moved on, to
// REFUNDED). A CANCELLED order is compensated again, which the store takes
// as a repeat, with the search a create that may have reached the gateway
// calls for.
func (p *payment) recall(ctx workflow.Context, held activities.ReserveResult) (ended bool, st State, err error) {
	p.state.Attempts, p.maybeAtGateway = held.Attempts, held.MaybeSent
	p.track(held.TransactionKey)
	if held.Resends > 0 {
		// The earlier run re-sent after a create whose outcome was
		// unknown (an operator's reset to this task): a FAILED after them
		// is held for a search by order id as that run held it (decide),
		// made a re-send's grace from now (when the latest left, this run
		// does not know), and this run's grants follow that run's.
		p.resends = held.Resends
		p.listedBy = workflow.Now(ctx).Add(p.proofGrace(true))
	}
	switch held.Status {
	case status.OrderConfirmed, status.OrderFailed:
		p.state.TransactionKey, p.state.Reason = held.TransactionKey, held.PaymentReason
		p.recalled = &gateway.Transaction{TransactionKey: held.TransactionKey, Status: gateway.StatusSuccess}
		if held.Status == status.OrderFailed {
			p.recalled.Status = gateway.StatusFailed
		}
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		p.setStatus(dctx, held.Status, held.PaymentStatus)
		p.log.Info("order ended by an earlier run of the first workflow task", "status", held.Status, "payment", held.PaymentStatus)
		p.drainLate(dctx)
		return true, p.state, nil
	case status.OrderCancelled:
		if ctx.Err() != nil {
			st, err = p.cancelled(ctx)
		} else {
			st, err = p.compensate(ctx, "cancelled by an earlier run of the first workflow task")
		}
		return true, st, err
	}
	return false, p.state, nil
}
