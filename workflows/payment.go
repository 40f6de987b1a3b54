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
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/status"
)

// a is how workflow code names activities: only its method values are used.
var a *activities.Activities

// Workflows carries the worker's tuning into the workflows it registers.
type Workflows struct {
	tuning Tuning
}

// New returns the workflows with the given tuning.
func New(t Tuning) *Workflows { return &Workflows{tuning: t} }

// Register registers the workflows under their public names.
func (w *Workflows) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(w.Payment, workflow.RegisterOptions{Name: PaymentWorkflowName})
	r.RegisterWorkflowWithOptions(w.Refund, workflow.RegisterOptions{Name: RefundWorkflowName})
	r.RegisterWorkflowWithOptions(w.Reconcile, workflow.RegisterOptions{Name: ReconcileWorkflowName})
	r.RegisterWorkflowWithOptions(w.Recover, workflow.RegisterOptions{Name: RecoverWorkflowName})
}

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

// versionMoneySafety gates the fixes of the money-safety review, in
// effect for runs started after them: Reserve waits for an operator's cancel
// to let it end; the create retries a database outage for as long as it
// lasts, counts creates from the database, treats any failure it cannot
// classify as an unknown outcome and authorises each re-send explicitly; a
// FAILED answer decides only when no other transaction of the order is live;
// and a final order status never moves.
//
// Later changes of the payment workflow's commands take the next version of
// the same change ID rather than one of their own: each GetVersion a run asks
// costs it a marker and a search-attribute upsert (the SDK's
// TemporalChangeVersion), and every order pays that.
//
// localSteps (2): the order's database steps run as local activities
// (dbStep) and search attributes are upserted only when they change.
//
// localCreate (3): the create runs as a local activity too (sendLocally),
// and REQUESTING reaches the search attributes only if the create goes on
// as a regular activity: a create answered inside the task that sent it
// goes straight to PENDING (or UNKNOWN, or FAILED) in one upsert.
//
// reserveRecalls (4): Reserve's answer is the order as the database holds
// it, read by a run of the first workflow task again (its worker died, or
// the server refused to close the workflow while a signal or a cancel
// waited), whose history has no marker of what the first run did (recall):
// an order it settled ends as settled, and a create that may have reached
// the gateway makes a cancel search the gateway by order. And a cancel whose
// compensation finds the order already FAILED ends the workflow as the
// refusal did, completed, not cancelled.
//
// fencedCancel (5): a compensation that did not search the gateway by order
// tells CancelOrder so, and when CancelOrder finds a create that may have
// reached the gateway after all (a run whose view is older than the
// database's: an earlier run of its task stalled, not dead, and went on),
// it searches the gateway by order, cancels what it finds, and cancels the
// order again.
const (
	versionMoneySafety = "money-safety"
	moneySafe          = workflow.Version(1)
	localSteps         = workflow.Version(2)
	localCreate        = workflow.Version(3)
	reserveRecalls     = workflow.Version(4)
	fencedCancel       = workflow.Version(5)
)

// idRuleChange versions the id rule's check (package ids) in setup.
const idRuleChange = "id-rule"

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

// cancelTakes: an operator's cancel ends the wait; from localSteps on, not
// once an answer is in hand. A local Settle commits inside the task that
// received the answer, before that task completes; a task that does not
// complete (the server will not close a workflow while a cancel request
// waits; a worker dies) runs again from its history, where the cancel may
// now come with the answer, and must decide as the first run did: settle,
// never compensate (that would refund a charge already CONFIRMED, then fail
// on CONFIRMED -> CANCELLED). So, too, poll reads a result that comes back
// with a cancel, and run goes on to await after a create the gateway answered.
func (p *payment) cancelTakes(ctx workflow.Context) bool {
	return ctx.Err() != nil && (p.v < localSteps || p.outcome == nil)
}

type awaitEnd int

const (
	endOutcome awaitEnd = iota
	endDeadline
	endCancelled
)

// await waits for the first definitive answer, polling with backoff.
//
// From localCreate on it keeps one timer, not two: the next poll, brought
// forward to the deadline when that comes first. Every wake-up checks the
// deadline anyway, and a timer costs the server a task to write and one to
// cancel for every order a callback answers.
func (p *payment) await(ctx workflow.Context) awaitEnd {
	timerCtx, cancelTimers := workflow.WithCancel(ctx)
	defer cancelTimers()
	var deadline workflow.Future // fires never from localCreate on: poll does its work
	if p.v < localCreate {
		deadline = workflow.NewTimerWithOptions(timerCtx, max(p.state.Deadline.Sub(workflow.Now(ctx)), 0),
			workflow.TimerOptions{Summary: "order deadline"})
	}
	delay := p.tuning.PollInitial
	poll := p.pollTimer(timerCtx, delay)
	for p.outcome == nil {
		var pollDue, deadlineDue bool
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(p.callbacks, func(c workflow.ReceiveChannel, _ bool) {
			var cb gateway.Transaction
			c.Receive(ctx, &cb)
			p.onCallback(ctx, cb)
		})
		sel.AddReceive(p.hints, func(c workflow.ReceiveChannel, _ bool) { p.onHint(ctx, c) })
		sel.AddFuture(poll, func(workflow.Future) { pollDue = true })
		if deadline != nil {
			sel.AddFuture(deadline, func(workflow.Future) { deadlineDue = true })
		}
		sel.Select(ctx)
		switch {
		case p.cancelTakes(ctx):
			return endCancelled
		case p.outcome != nil:
		case deadlineDue:
			return endDeadline
		case p.v >= moneySafe && !workflow.Now(ctx).Before(p.state.Deadline):
			// The selector takes the first ready case in the order added: a
			// stream of signals (forged hints) arriving faster than their
			// lookups end would otherwise never let the deadline be picked.
			return endDeadline
		case pollDue:
			p.hintLooked = false
			p.poll(ctx, false)
			if p.outcome == nil && !(p.v >= localSteps && ctx.Err() != nil) && p.resendDue(ctx) {
				p.resend(ctx)
			}
			if p.cancelTakes(ctx) {
				return endCancelled
			}
			delay = min(delay*2, p.tuning.PollMax)
			poll = p.pollTimer(timerCtx, p.nextPoll(ctx, delay))
		}
	}
	return endOutcome
}

// pollTimer starts the timer of the next poll, due after d; from
// localCreate on it is the deadline's timer too (await).
func (p *payment) pollTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	if p.v < localCreate {
		return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "next status poll"})
	}
	if left := max(p.state.Deadline.Sub(workflow.Now(ctx)), 0); left <= d {
		return workflow.NewTimerWithOptions(ctx, left, workflow.TimerOptions{Summary: "order deadline"})
	}
	return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "next status poll (the deadline is later)"})
}

// breakerTimedPoll versions the poll after an open lookup breaker: from
// version 1 it comes when the breaker may let a lookup through (the
// activity's Unavailable.RetryAfter, jitter included) instead of on the
// backoff: earlier would only be refused again, later would leave the order
// waiting after the gateway is back. PollMax still bounds it.
const breakerTimedPoll = "breaker-timed-poll"

// nextPoll is the delay to the next regular poll.
func (p *payment) nextPoll(ctx workflow.Context, backoff time.Duration) time.Duration {
	if p.retryAfter <= 0 || workflow.GetVersion(ctx, breakerTimedPoll, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return backoff
	}
	return min(p.retryAfter, p.tuning.PollMax)
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

// setStatus updates the query state and the search attributes together.
// A final order status never moves.
func (p *payment) setStatus(ctx workflow.Context, order status.Order, pay status.Payment) {
	p.setState(order, pay)
	p.publish(ctx)
}

// setState updates the query state only; publish brings the search
// attributes up to it.
func (p *payment) setState(order status.Order, pay status.Payment) {
	if p.v >= moneySafe && p.state.Status.Final() && order != "" && order != p.state.Status {
		p.log.Warn("order already final; status kept", "status", p.state.Status, "refused", order)
		order = ""
	}
	if order != "" {
		p.state.Status = order
	}
	if pay != "" {
		p.state.PaymentStatus = pay
	}
}

// publish upserts the statuses the search attributes do not show yet.
func (p *payment) publish(ctx workflow.Context) {
	var updates []temporal.SearchAttributeUpdate
	current := workflow.GetTypedSearchAttributes(ctx)
	for _, kv := range []struct {
		key   temporal.SearchAttributeKeyKeyword
		value string
	}{{OrderStatusKey, string(p.state.Status)}, {PaymentStatusKey, string(p.state.PaymentStatus)}} {
		if kv.value == "" {
			continue
		}
		// Each upsert is a write to the server's visibility store; one that
		// changes nothing (the starter sets RESERVING at start) is skipped.
		if was, ok := current.GetKeyword(kv.key); p.v >= localSteps && ok && was == kv.value {
			continue
		}
		updates = append(updates, kv.key.ValueSet(kv.value))
	}
	if len(updates) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		p.log.Warn("upsert search attributes", "error", err)
	}
}

// dbStep runs one of the order's database activities (Reserve, Settle,
// CancelOrder, RecordEvent). From localSteps on it is a local activity, run
// by the worker inside the workflow task that asks for it: a regular one
// costs two more task hops through the server and a workflow task of its
// own (docs/design.md §2). Each is one short transaction, idempotent, so a
// retry repeats it harmlessly, and a worker lost mid-task runs it again on
// replay. After localTries it goes on as a regular activity (options.go).
func (p *payment) dbStep(ctx workflow.Context, summary string, activity, in any) workflow.Future {
	regular := func() workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, databaseOptions(summary)), activity, in)
	}
	if p.v < localSteps {
		return regular()
	}
	local := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions(summary)), activity, in)
	done, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if err := local.Get(gctx, nil); outOfLocalTries(err) {
			p.log.Warn("database step still failing after its local tries; going on as a regular activity", "step", summary, "error", err)
			settable.Chain(regular())
			return
		}
		settable.Chain(local)
	})
	return done
}

func (p *payment) settleStep(ctx workflow.Context, in activities.SettleInput) error {
	summary := fmt.Sprintf("Record order %s (amount %d): %s", p.in.OrderID, p.in.Amount, in.Cause)
	err := p.dbStep(ctx, summary, a.Settle, in).Get(ctx, nil)
	if err != nil {
		p.log.Error("settle step failed", "cause", in.Cause, "error", err)
	}
	return err
}

// record appends to the order's event log; losing a note is not worth
// failing the payment over, so errors are logged only.
func (p *payment) record(ctx workflow.Context, kind, cause string, detail map[string]any) {
	if kind == activities.KindAnomaly {
		p.state.Anomalies++
	}
	err := p.dbStep(ctx, fmt.Sprintf("Note on order %s (amount %d): %s", p.in.OrderID, p.in.Amount, cause),
		a.RecordEvent, activities.EventInput{OrderID: p.in.OrderID, Kind: kind, Cause: cause, Detail: detail}).Get(ctx, nil)
	if err != nil {
		p.log.Warn("record event", "cause", cause, "error", err)
	}
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func isType(err error, types ...string) bool {
	t := errorType(err)
	return t != "" && slices.Contains(types, t)
}
