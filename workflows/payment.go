// Package workflows holds PaymentWorkflow, the durable life of one order
// (docs/design.md §2), RefundWorkflow for charges that land too late, and
// the reconciliation sweep with its recovery (reconcile.go, recover.go; §10).
//
// The state machine of an order:
//
//	RESERVING --out of stock--> REJECTED
//	    | stock held
//	REQUESTING --4xx--> FAILED (stock released)
//	    | accepted, or outcome unknown      \--unreachable on every try--> CANCELLED (nothing to cancel)
//	PENDING --callback or poll: SUCCESS--> CONFIRMED (stock sold)
//	        --callback or poll: FAILED---> FAILED (stock released)
//	        --deadline, last lookup not SUCCESS, or operator cancel--> CANCELLED
//	                                       (gateway transactions cancelled, stock released)
//
// While PENDING the workflow waits for whichever definitive answer comes
// first: the gateway-callback signal or a status poll (backing off from
// PollInitial to PollMax). An open lookup breaker is no answer at all: the
// payment stays PENDING and the stock stays held. Any later answer that
// disagrees is recorded as an anomaly and changes nothing.
package workflows

import (
	"fmt"
	"slices"
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

// payment is the state of one PaymentWorkflow run.
type payment struct {
	in        PaymentInput
	tuning    Tuning
	state     State
	log       log.Logger
	callbacks workflow.ReceiveChannel
	hints     workflow.ReceiveChannel // LookupHintSignal

	keys           []string             // every gateway transaction of this order we know of
	closed         map[string]bool      // those known FAILED or CANCELLED: nothing left to cancel
	maybeAtGateway bool                 // a create was accepted or may have been
	unknownSince   time.Time            // when the latest create's outcome became unknown
	outcome        *gateway.Transaction // the first definitive answer
	compensated    []string             // transactions cancelled by compensation
	recalled       *gateway.Transaction // the answer an earlier run of the first task settled (recall)
	resends        int                  // re-sends authorised so far
	hintLooked     bool                 // a lookup hint was looked up since the last regular poll (hints.go)
	retryAfter     time.Duration        // the latest poll's breaker was open: when it may let one through

	// v is the run's code version: runs started before the money-safety
	// fixes replay on the code they ran (see versionMoneySafety).
	v workflow.Version
}

// checkIDs holds the order's ids to the one rule (package ids).
func checkIDs(in PaymentInput) error {
	for _, err := range []error{ids.CheckOrder(in.OrderID), ids.CheckProduct(in.ProductID), ids.CheckUser(in.UserID)} {
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *Workflows) setup(ctx workflow.Context, in PaymentInput) (*payment, error) {
	if in.OrderID == "" || in.ProductID == "" || in.Quantity <= 0 || in.Amount <= 0 {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid order: id %q product %q quantity %d amount %d", in.OrderID, in.ProductID, in.Quantity, in.Amount),
			activities.ErrInvalidOrder, nil)
	}
	// An id outside the rule is refused before Reserve is scheduled: it would
	// hold stock and then fail at the gateway, or (a NUL) fail Reserve forever.
	// Only this path asks for a version, so valid orders' histories are as
	// before; an order started before the rule has no marker and replays the
	// commands it ran.
	if err := checkIDs(in); err != nil && workflow.GetVersion(ctx, idRuleChange, workflow.DefaultVersion, 1) > workflow.DefaultVersion {
		return nil, temporal.NewNonRetryableApplicationError("invalid order: "+err.Error(), activities.ErrInvalidOrder, nil)
	}
	if in.Deadline <= 0 {
		in.Deadline = DefaultDeadline
	}
	if in.Deadline > MaxDeadline {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid order: deadline %s is longer than %s", in.Deadline, MaxDeadline), activities.ErrInvalidOrder, nil)
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
	p.v = workflow.GetVersion(ctx, versionMoneySafety, workflow.DefaultVersion, fencedCancel)
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (State, error) { return p.state, nil }); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *payment) run(ctx workflow.Context) (State, error) {
	p.setStatus(ctx, status.OrderReserving, "")
	summary := fmt.Sprintf("Reserve %d × %s for order %s (amount %d)", p.in.Quantity, p.in.ProductID, p.in.OrderID, p.in.Amount)
	in := activities.ReserveInput{OrderID: p.in.OrderID, ProductID: p.in.ProductID, Quantity: p.in.Quantity, Amount: p.in.Amount,
		UserID: p.in.UserID, Deadline: p.state.Deadline}
	// An operator's cancel must not compensate while Reserve may still
	// commit: the stock it holds would stay held with no workflow.
	var reserved workflow.Future
	switch {
	case p.v >= localSteps:
		// A cancelled local activity's future resolves at once, whatever its
		// statement goes on to do: Reserve runs where the cancel cannot reach.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		reserved = p.dbStep(dctx, summary, a.Reserve, in)
	case p.v >= moneySafe:
		reserved = workflow.ExecuteActivity(workflow.WithWaitForCancellation(workflow.WithActivityOptions(ctx, databaseOptions(summary)), true), a.Reserve, in)
	default:
		reserved = p.dbStep(ctx, summary, a.Reserve, in)
	}
	var held activities.ReserveResult
	err := reserved.Get(ctx, &held)
	if err == nil && p.v >= reserveRecalls && held.Attempts > 0 {
		if ended, st, err := p.recall(ctx, held); ended {
			return st, err
		}
	}
	rejected := isType(err, activities.ErrOutOfStock, activities.ErrUnknownProduct)
	switch {
	case ctx.Err() != nil && !(rejected && p.v >= moneySafe):
		return p.cancelled(ctx)
	case rejected:
		p.state.Reason = errorType(err)
		p.setStatus(ctx, status.OrderRejected, "")
		p.log.Info("order rejected", "reason", p.state.Reason)
		return p.state, nil
	case err != nil:
		return p.state, err
	}

	if p.v >= localCreate {
		p.setState(status.OrderRequesting, status.PaymentRequested) // published by send if it must wait
	} else {
		p.setStatus(ctx, status.OrderRequesting, status.PaymentRequested)
	}
	sent, err := p.send(ctx, p.tuning.RequestAttempts, "")
	// From localSteps on, a create the gateway answered goes on to await
	// under a cancel too: an answer delivered with the create's (a callback)
	// is settled there rather than compensated (cancelTakes).
	answered := p.v >= moneySafe && sent == sendRejected && err == nil ||
		p.v >= localSteps && err == nil && (sent == sendAccepted || sent == sendUnknown)
	if ctx.Err() != nil && !answered {
		return p.cancelled(ctx)
	}
	if err != nil {
		return p.state, err
	}
	switch sent {
	case sendRejected:
		return p.settle(ctx, gateway.Transaction{OrderID: p.in.OrderID, Amount: p.in.Amount, Status: gateway.StatusFailed,
			Reason: p.state.Reason}, "gateway rejected the create")
	case sendUnreachable:
		p.log.Warn("gateway unreachable on every try; nothing was charged")
		return p.compensate(ctx, "gateway unreachable on every try")
	}

	switch p.await(ctx) {
	case endCancelled:
		return p.cancelled(ctx)
	case endDeadline:
		return p.deadlinePassed(ctx, p.settle)
	}
	return p.settle(ctx, *p.outcome, "definitive answer")
}

// recall takes up what an earlier run of this, the first workflow task, left
// in the database (see reserveRecalls): the creates it began, and how it
// ended the order. An order it ended ends so again, before an operator's
// cancel is looked at, as an answer in hand does (cancelTakes): CONFIRMED
// keeps its charge, FAILED is not waited on, and neither is settled again
// (the store did that; after a reset to this task the payment may since have
// moved on, to REFUNDED). A CANCELLED order is compensated again, which the
// store takes as a repeat, with the search a create that may have reached
// the gateway calls for.
func (p *payment) recall(ctx workflow.Context, held activities.ReserveResult) (ended bool, st State, err error) {
	p.state.Attempts, p.maybeAtGateway = held.Attempts, held.MaybeSent
	p.track(held.TransactionKey)
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

func (p *payment) track(key string) {
	if key != "" && !slices.Contains(p.keys, key) {
		p.keys = append(p.keys, key)
	}
}

// userForGateway is the user the order's lookups and cancels name (runs
// before versionMoneySafety named the client's default user).
func (p *payment) userForGateway() string {
	if p.v < moneySafe {
		return ""
	}
	return p.in.UserID
}
