package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// The endings: settling on a definitive answer, and compensation when none
// came in time or an operator cancelled.

// settle records the definitive answer: SUCCESS sells the stock, FAILED
// gives it back. It runs disconnected: once the gateway has answered, an
// operator's cancel must not leave the order half-recorded.
func (p *payment) settle(ctx workflow.Context, tx gateway.Transaction, cause string) (State, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if tx.Status == gateway.StatusSuccess {
		p.state.TransactionKey = tx.TransactionKey
		if err := p.settleStep(dctx, activities.SettleInput{OrderID: p.in.OrderID, Order: status.OrderConfirmed,
			Payment: status.PaymentSuccess, TransactionKey: tx.TransactionKey, Reservation: activities.CommitReservation,
			Cause: "payment SUCCESS: " + cause}); err != nil {
			return p.state, err
		}
		p.setStatus(dctx, status.OrderConfirmed, status.PaymentSuccess)
		// Any other live transaction of this order could become a second charge.
		others := slices.DeleteFunc(slices.Clone(p.keys), func(k string) bool { return k == tx.TransactionKey || p.closed[k] })
		if len(others) > 0 {
			p.record(dctx, activities.KindAnomaly, "order has other transactions; cancelling them", map[string]any{"transaction_keys": others})
			p.cancelAtGateway(dctx, others, false)
		}
	} else {
		p.state.Reason = tx.Reason
		if err := p.settleStep(dctx, activities.SettleInput{OrderID: p.in.OrderID, Order: status.OrderFailed,
			Payment: status.PaymentFailed, TransactionKey: tx.TransactionKey, Reason: tx.Reason,
			Reservation: activities.ReleaseReservation, Cause: "payment FAILED: " + cause}); err != nil {
			return p.state, err
		}
		p.setStatus(dctx, status.OrderFailed, status.PaymentFailed)
	}
	p.drainLate(dctx)
	return p.state, nil
}

// deadlinePassed: one last look, then settle (p.settle, or a recovery's
// p.end) what it found, or compensate.
func (p *payment) deadlinePassed(ctx workflow.Context, settle func(workflow.Context, gateway.Transaction, string) (State, error)) (State, error) {
	p.log.Info("deadline passed; last lookup before compensation")
	p.awaitListing(ctx)
	p.drainCallbacks(ctx)
	if p.outcome == nil {
		p.poll(ctx, "")
	}
	if p.cancelTakes(ctx) {
		// An operator's cancel ended the grace's wait or the last lookup:
		// it is the operator's, not the deadline's (store.CauseOperatorCancel).
		return p.cancelled(ctx)
	}
	if p.outcome != nil {
		return settle(ctx, *p.outcome, "found at the deadline")
	}
	if p.heldFailed != nil && len(p.otherLive(p.heldFailed.TransactionKey)) == 0 {
		// The gateway said FAILED; no search could look for another
		// transaction before the deadline. Its word stands: a hidden one
		// that charges later is refunded by its callback or the sweep. A
		// transaction known live is not hidden: it is compensated.
		return settle(ctx, *p.heldFailed, "FAILED answer; the order could not be searched before the deadline")
	}
	return p.compensate(ctx, "deadline passed without a definitive answer")
}

// awaitListing holds the deadline's last lookup until the gateway lists
// what the latest create that may have reached it made (listedBy, its
// grace): a lookup or search inside that grace may miss the transaction,
// and the order would then be failed or compensated while it charges. The
// deadline bounds creates, not this wait; a callback that decides ends it.
func (p *payment) awaitListing(ctx workflow.Context) {
	wait := p.listedBy.Sub(workflow.Now(ctx))
	if wait <= 0 || p.outcome != nil {
		return
	}
	timer := workflow.NewTimerWithOptions(ctx, wait, workflow.TimerOptions{Summary: "the latest create's grace, past the deadline"})
	for done := false; !done && p.outcome == nil && ctx.Err() == nil; {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { done = true })
		sel.AddReceive(p.callbacks, func(workflow.ReceiveChannel, bool) { p.drainCallbacks(ctx) })
		sel.Select(ctx)
	}
}

// cancelled is an operator's cancel: compensate, then end as cancelled.
func (p *payment) cancelled(ctx workflow.Context) (State, error) {
	p.log.Info("workflow cancelled by an operator; compensating")
	if _, err := p.compensate(ctx, store.CauseOperatorCancel); err != nil {
		return p.state, err
	}
	if p.state.Status == status.OrderFailed {
		return p.state, nil // the gateway's refusal ended it first (compensate kept FAILED)
	}
	return p.state, temporal.NewCanceledError("order cancelled by an operator; compensation done")
}

// compensate cancels whatever the gateway may hold for this order, releases
// the stock and ends the order CANCELLED — on a disconnected context, so it
// also runs when the workflow itself is being cancelled.
func (p *payment) compensate(ctx workflow.Context, cause string) (State, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	payment, searched, err := p.cancelPayments(dctx)
	if err != nil {
		return p.state, err
	}
	cancelOrder := func() error {
		in := activities.SettleInput{OrderID: p.in.OrderID, Payment: payment, Cause: cause,
			Unsearched: !p.maybeAtGateway, SearchedAt: searched}
		return p.dbStep(dctx, fmt.Sprintf("Cancel order %s (amount %d) and release %d × %s", p.in.OrderID, p.in.Amount, p.in.Quantity, p.in.ProductID),
			a.CancelOrder, in).Get(dctx, nil)
	}
	err = cancelOrder()
	// Refused: the database knows of a create the search may have missed
	// (none was made, or a create was answered after it). Each create is
	// answered once, so the searches end. Past maxCancelSearches (a bug)
	// they go on a minute apart: the workflow never fails with the stock
	// reserved, and the gateway is not hammered.
	for tries := 1; isType(err, activities.ErrGatewayNotSearched); tries++ {
		if tries > maxCancelSearches {
			p.log.Error("compensation still refused after many searches of the gateway; searching again in a minute", "searches", tries-1, "error", err)
			_ = workflow.Sleep(dctx, time.Minute)
		}
		p.log.Warn("a create this run did not see may have reached the gateway; searching it before cancelling", "error", err)
		p.maybeAtGateway = true
		refunded := payment == status.PaymentRefunded
		if payment, searched, err = p.cancelPayments(dctx); err != nil {
			return p.state, err
		}
		if refunded {
			payment = status.PaymentRefunded // an earlier search's refund stands
		}
		err = cancelOrder()
	}
	if p.endedFailed(err) {
		p.log.Warn("order already FAILED: the gateway refused its create in an earlier run of this task; kept", "cause", cause)
		p.setStatus(dctx, status.OrderFailed, status.PaymentFailed)
		if payment == status.PaymentRefunded {
			// Another transaction of the order was charged, and refunded just now.
			_ = p.settleStep(dctx, activities.SettleInput{OrderID: p.in.OrderID, Payment: status.PaymentRefunded, Cause: cause})
			p.setStatus(dctx, "", status.PaymentRefunded)
		}
		p.drainLate(dctx)
		return p.state, nil
	}
	if err != nil {
		return p.state, err
	}
	p.state.Reason = cause
	p.setStatus(dctx, status.OrderCancelled, payment)
	p.drainLate(dctx)
	return p.state, nil
}

// maxCancelSearches is how many searches of the gateway compensate makes
// back to back after CancelOrder's refusals before it spaces them out.
const maxCancelSearches = 10

// cancelPayments is compensation's gateway half: it cancels the
// transactions this run knows of, and searches the gateway by order when a
// create may have reached it. It answers the payment status to record and
// when the search was made (zero without one).
func (p *payment) cancelPayments(ctx workflow.Context) (status.Payment, time.Time, error) {
	payment := status.PaymentCancelled
	var searched time.Time
	if len(p.keys) > 0 || p.maybeAtGateway {
		res, err := p.cancelAtGateway(ctx, p.keys, p.maybeAtGateway)
		if err != nil {
			return "", searched, err
		}
		if res.Refunded > 0 {
			payment = status.PaymentRefunded
		}
		searched = res.SearchedAt
	}
	if p.state.Attempts == 0 && !p.maybeAtGateway {
		payment = "" // nothing was ever sent: there is no payment to close
	}
	return payment, searched, nil
}

// endedFailed: compensation's CancelOrder was refused because the order is
// already FAILED: a run of a workflow task that did not complete: the create is a local activity, so a task can send it,
// settle the gateway's refusal FAILED (releasing the stock) and end the
// workflow, and the server refuses to end it while an operator's cancel
// waits. The task runs again from its history, which holds neither the
// create nor its refusal, with the cancel, and compensates. Nothing was
// charged and the stock is back: FAILED stands, and the workflow ends on it
// rather than failing. (Answers that can confirm — a callback, a lookup —
// are in the history, and settled again on such a run: cancelTakes.)
func (p *payment) endedFailed(err error) bool {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrIllegalTransition || !appErr.HasDetails() {
		return false
	}
	var tr activities.Transition
	return appErr.Details(&tr) == nil && tr.Entity == "order" && status.Order(tr.From) == status.OrderFailed
}

// cancelAtGateway cancels transactions until the gateway acknowledges.
func (p *payment) cancelAtGateway(ctx workflow.Context, keys []string, searchByOrder bool) (activities.CancelResult, error) {
	opts := cancelOptions(fmt.Sprintf("Cancel order %s's payment of %d at the gateway (refund if charged)", p.in.OrderID, p.in.Amount))
	var res activities.CancelResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.CancelPayments,
		activities.CancelInput{OrderID: p.in.OrderID, UserID: p.in.UserID, TransactionKeys: keys, SearchByOrder: searchByOrder}).Get(ctx, &res)
	for _, tx := range res.Transactions {
		p.compensated = append(p.compensated, tx.TransactionKey)
		p.track(tx.TransactionKey)
	}
	return res, err
}

// drainLate reads callbacks that arrived while the order was being settled.
// A SUCCESS that is not the order's own confirmed charge, and that the
// compensation did not already cancel, took money for nothing: it is
// refunded now, never dropped.
func (p *payment) drainLate(ctx workflow.Context) {
	for {
		cb, ok := p.receiveCallback(ctx)
		if !ok {
			return
		}
		if r := p.recalled; r != nil && cb.TransactionKey == r.TransactionKey && cb.Status == r.Status {
			continue // the answer the earlier run settled, delivered again
		}
		ours := p.state.Status == status.OrderConfirmed && cb.TransactionKey == p.state.TransactionKey
		// One of another amount is not the order's (ofTheOrder): onCallback
		// records it, and its money is left alone, as the sweep leaves it.
		if cb.Status == gateway.StatusSuccess && cb.OrderID == p.in.OrderID && cb.Amount == p.in.Amount && !ours &&
			!slices.Contains(p.compensated, cb.TransactionKey) {
			p.record(ctx, activities.KindAnomaly, "SUCCESS arrived after the order was settled "+string(p.state.Status)+"; refunding",
				map[string]any{"transaction_key": cb.TransactionKey})
			if _, err := p.cancelAtGateway(ctx, []string{cb.TransactionKey}, false); err == nil && p.state.Status != status.OrderConfirmed {
				_ = p.settleStep(ctx, activities.SettleInput{OrderID: p.in.OrderID, Payment: status.PaymentRefunded,
					Cause: "late SUCCESS refunded"})
				p.setStatus(ctx, "", status.PaymentRefunded)
			}
		} else {
			p.onCallback(ctx, cb)
		}
	}
}
