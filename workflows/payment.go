// Package workflows holds PaymentWorkflow, the durable life of one order
// (docs/design.md, "The state machine"), RefundWorkflow for charges that
// land too late, and the reconciliation sweep with its recovery.
//
// The payment's files read top-down, each using only the ones below it:
// payment.go (run: reserve, send, await, then settle or compensate) and
// recover.go; reserve.go and await.go; hints.go, create.go and settle.go;
// answers.go; steps.go (the payment's state and its database steps); and
// api.go and options.go, which everything uses.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/status"
)

// Payment is PaymentWorkflow: it drives one order to a final status.
func (w *Workflows) Payment(ctx workflow.Context, in PaymentInput) (State, error) {
	p, err := w.setup(ctx, in)
	if err != nil {
		return State{}, err
	}
	return p.run(ctx)
}

// checkInput refuses an order before anything is reserved: an id outside
// the rule (package ids) would hold stock and then fail at the gateway, or
// (a NUL) fail Reserve forever.
func checkInput(in PaymentInput) error {
	if in.OrderID == "" || in.ProductID == "" || in.Quantity <= 0 || in.Amount <= 0 {
		return fmt.Errorf("id %q product %q quantity %d amount %d", in.OrderID, in.ProductID, in.Quantity, in.Amount)
	}
	for _, err := range []error{ids.CheckNewOrder(in.OrderID), ids.CheckProduct(in.ProductID), ids.CheckUser(in.UserID),
		gateway.CheckCard(in.CardType, in.CardNo)} {
		if err != nil {
			return err
		}
	}
	if in.Deadline > MaxDeadline {
		return fmt.Errorf("deadline %s is longer than %s", in.Deadline, MaxDeadline)
	}
	return nil
}

func (w *Workflows) setup(ctx workflow.Context, in PaymentInput) (*payment, error) {
	if err := checkInput(in); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid order: "+err.Error(), activities.ErrInvalidOrder, nil)
	}
	if in.Deadline <= 0 {
		in.Deadline = DefaultDeadline
	}
	var tuning Tuning
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return w.tuning }).Get(&tuning); err != nil {
		return nil, err
	}
	p := &payment{
		in:        in,
		tuning:    tuning,
		log:       log.With(workflow.GetLogger(ctx), "order_id", in.OrderID),
		callbacks: workflow.GetSignalChannel(ctx, CallbackSignal),
		hints:     workflow.GetSignalChannel(ctx, LookupHintSignal),
		closed:    map[string]bool{},
		state: State{OrderID: in.OrderID, Status: status.OrderReserving,
			Deadline: workflow.Now(ctx).Add(in.Deadline)},
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (State, error) { return p.state, nil }); err != nil {
		return nil, err
	}
	return p, nil
}

// run is the order's state machine: reserve the stock, send the create,
// await the gateway's answer, then settle it — or compensate at the
// deadline or on an operator's cancel.
func (p *payment) run(ctx workflow.Context) (State, error) {
	if ended, st, err := p.reserve(ctx); ended {
		return st, err
	}

	p.setState(status.OrderRequesting, status.PaymentRequested) // published by send if it must wait
	sent, err := p.send(ctx, "", time.Time{})
	// A create the gateway answered is settled even under a cancel: an
	// answer delivered with it (a callback) must not be compensated.
	if ctx.Err() != nil && (err != nil || sent == sendUnreachable || sent == sendExpired) {
		return p.cancelled(ctx)
	}
	if err != nil {
		return p.state, err
	}
	switch sent {
	case sendRejected:
		if p.resends > 0 {
			// The refusal of an earlier run's re-send, reported again (an
			// operator's reset to the first task): held for a search as
			// that run held it, not settled as a first create's refusal.
			p.holdRefusal(ctx)
			break
		}
		return p.settle(ctx, gateway.Transaction{OrderID: p.in.OrderID, Amount: p.in.Amount, Status: gateway.StatusFailed,
			Reason: p.state.Reason}, "gateway rejected the create")
	case sendUnreachable:
		p.log.Warn("gateway unreachable on every try; nothing was charged")
		return p.compensate(ctx, "gateway unreachable on every try")
	case sendExpired:
		return p.deadlinePassed(ctx, p.settle)
	}

	switch p.await(ctx) {
	case endCancelled:
		return p.cancelled(ctx)
	case endDeadline:
		return p.deadlinePassed(ctx, p.settle)
	}
	return p.settle(ctx, *p.outcome, "definitive answer")
}
