package workflows

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
)

// RecoverWorkflow takes over an order whose PaymentWorkflow is gone
// (terminated, or its history lost) while the database still has it open.
// It is PaymentWorkflow without the create: the order's state is read back
// from the database, the gateway is asked what it holds, and the same
// settle and compensate code as PaymentWorkflow's ends the order. It never
// sends a create: whatever may have been charged is found by order id.
//
// It runs under the order's own workflow id, so callbacks and hints reach
// it, a sweep finds the order's workflow running and leaves it alone, and
// no second one can start beside it.

// Recover is RecoverWorkflow.
func (w *Workflows) Recover(ctx workflow.Context, in RecoverInput) (State, error) {
	if in.OrderID == "" {
		return State{}, temporal.NewNonRetryableApplicationError("recovery needs an order id", activities.ErrInvalidOrder, nil)
	}
	// Only under the order's own id, as the sweep starts it: the server
	// then refuses it while the order's PaymentWorkflow runs (the ids
	// collide). Started under any other id, by a plaintext client say, it
	// could settle or compensate beside a live one. A pure check: no
	// command, so recorded histories replay.
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; id != PaymentWorkflowID(in.OrderID) {
		return State{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("recovery of order %s refused: it runs only as workflow %s, not %s", in.OrderID, PaymentWorkflowID(in.OrderID), id),
			activities.ErrInvalidOrder, nil)
	}
	var r activities.RecoveryOrder
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, databaseOptions("Read order "+in.OrderID+" back for its recovery")),
		sw.ReadRecoveryOrder, in.OrderID).Get(ctx, &r)
	if err != nil {
		return State{}, err
	}
	o := r.Order
	if !r.Found || o.Status.Final() {
		// It ended between the sweep's look and now (a second sweep's
		// recovery after the first's): nothing to recover. This run is
		// now the order's latest, the one Describe and the UI show: it
		// carries the order's statuses as they stand.
		st := State{OrderID: in.OrderID, Status: o.Status, PaymentStatus: o.PaymentStatus, TransactionKey: o.TransactionKey}
		if r.Found {
			(&payment{state: st, log: workflow.GetLogger(ctx)}).publish(ctx)
		}
		return st, nil
	}
	var tuning Tuning
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return w.tuning }).Get(&tuning); err != nil {
		return State{}, err
	}
	// The order's own deadline, as Reserve recorded it; for an order placed
	// before deadlines were recorded, the default one from its creation.
	// Either way at least one poll from now.
	deadline := r.Deadline
	if deadline.IsZero() {
		deadline = o.CreatedAt.Add(DefaultDeadline)
	}
	if floor := workflow.Now(ctx).Add(tuning.PollMax); deadline.Before(floor) {
		deadline = floor
	}
	p := &payment{
		in:             PaymentInput{OrderID: o.OrderID, ProductID: o.ProductID, Quantity: o.Quantity, Amount: o.Amount, UserID: o.UserID},
		tuning:         tuning,
		log:            log.With(workflow.GetLogger(ctx), "order_id", o.OrderID, "recovery", true),
		callbacks:      workflow.GetSignalChannel(ctx, CallbackSignal),
		hints:          workflow.GetSignalChannel(ctx, LookupHintSignal),
		closed:         map[string]bool{},
		keys:           r.Keys,
		maybeAtGateway: r.MaybeSent,
		state: State{OrderID: o.OrderID, Status: o.Status, PaymentStatus: o.PaymentStatus, TransactionKey: o.TransactionKey,
			Attempts: o.Attempts, Deadline: deadline},
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (State, error) { return p.state, nil }); err != nil {
		return State{}, err
	}
	p.setStatus(ctx, "", "")
	p.record(ctx, activities.KindAnomaly, "recovery started: the order is open and its workflow was not running",
		map[string]any{"order_status": string(o.Status), "payment_status": string(o.PaymentStatus), "transaction_keys": r.Keys})

	refusal := gateway.Transaction{OrderID: o.OrderID, Amount: o.Amount, Status: gateway.StatusFailed, Reason: r.Rejected}
	if r.Rejected != "" {
		// The latest create was refused: held, decided by a search that
		// lists nothing of the order (poll) — or, when none can be made
		// before the deadline, by deadlinePassed — never left for the
		// deadline's compensation.
		p.state.Reason = r.Rejected
		p.heldFailed = &refusal
	}
	if r.Rejected != "" && r.MaybeSent {
		// Refused after a create that may have reached the gateway: held
		// as PaymentWorkflow holds it (resend), decided by a search made
		// after the grace.
		p.resends = 1
		p.proofDue = workflow.Now(ctx).Add(p.proofGrace(true))
		// The deadline's last search waits for it too (deadlinePassed): a
		// recovery past its order's deadline lives one --poll-max, which
		// may be shorter.
		p.listedBy = p.proofDue
	}
	if r.MaybeSent && len(r.Keys) == 0 && r.Rejected == "" {
		// The latest create that may have reached the gateway has no
		// answer (unknown, or still SENDING): the gateway may list its
		// transaction up to the full unknown grace after it left, and when
		// that was the recovery does not know. Its deadline's last search
		// waits a full grace from its start (deadlinePassed), as
		// PaymentWorkflow's waits for the create's.
		p.listedBy = workflow.Now(ctx).Add(p.proofGrace(false))
	}
	if r.Resends > 0 && r.Rejected == "" {
		// A re-send may have reached the gateway after a create whose
		// outcome was unknown: that one may have made a transaction no
		// answer named. A FAILED for the re-send's is held as
		// PaymentWorkflow holds it (decide), for a search by order id made
		// once the re-send's grace has passed; when the re-send left the
		// recovery does not know, so the grace runs from its start.
		p.resends = r.Resends
		if by := workflow.Now(ctx).Add(p.proofGrace(true)); by.After(p.listedBy) {
			p.listedBy = by
		}
	}
	// Every transaction of the order, whatever the database knew of.
	p.poll(ctx, "the recovery's search")
	switch {
	case p.outcome != nil:
		return p.end(ctx, *p.outcome, "found by the recovery")
	case !r.MaybeSent && len(p.keys) == 0 && p.state.LastLookup != nil && p.state.LastLookup.Result == lookupNotFound:
		// No create can have reached the gateway and none ever will: no
		// workflow is left to send one.
		if r.Rejected != "" {
			p.state.Reason = r.Rejected
			return p.settle(ctx, refusal, "gateway rejected the create (recovery)")
		}
		return p.compensate(ctx, fmt.Sprintf("recovered: the order's workflow was gone with nothing at the gateway (%s)", o.Status))
	}
	switch p.await(ctx) {
	case endCancelled:
		return p.cancelled(ctx)
	case endDeadline:
		return p.deadlinePassed(ctx, p.end)
	}
	return p.end(ctx, *p.outcome, "found by the recovery")
}

// end settles what the recovery found. The store may refuse it: a payment
// recorded FAILED (a refused create, which PaymentWorkflow settles at once,
// its workflow gone before it could) cannot become SUCCESS when an earlier
// create's charge lands after all. The recovery then compensates — refunds
// whatever the gateway holds for the order, releases the stock — as
// PaymentWorkflow would have, failing the order and refunding the late
// charge: a recovery never fails with the stock held and a charge standing.
func (p *payment) end(ctx workflow.Context, tx gateway.Transaction, cause string) (State, error) {
	st, err := p.settle(ctx, tx, cause)
	if err == nil || !isType(err, activities.ErrIllegalTransition) {
		return st, err
	}
	p.maybeAtGateway = true // search the gateway by order id: every charge goes back
	p.record(ctx, activities.KindAnomaly, "recovery: the store refused settling "+tx.Status+"; compensating",
		map[string]any{"transaction_key": tx.TransactionKey, "error": err.Error()})
	return p.compensate(ctx, fmt.Sprintf("recovered: the store refused settling %s on %s (%s)", tx.Status, tx.TransactionKey, cause))
}
