// Package workflows holds PaymentWorkflow, the durable life of one order
// (SPEC §2), and RefundWorkflow for charges that land too late.
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
	"github.com/payguard/payguard/store"
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

	keys           []string             // every gateway transaction of this order we know of
	closed         map[string]bool      // those known FAILED or CANCELLED: nothing left to cancel
	maybeAtGateway bool                 // a create was accepted or may have been
	unknownSince   time.Time            // when the latest create's outcome became unknown
	outcome        *gateway.Transaction // the first definitive answer
	compensated    []string             // transactions cancelled by compensation
}

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
		closed:    map[string]bool{},
		state: State{OrderID: in.OrderID, Status: status.OrderReserving,
			Deadline: workflow.Now(ctx).Add(in.Deadline)},
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (State, error) { return p.state, nil }); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *payment) run(ctx workflow.Context) (State, error) {
	p.setStatus(ctx, status.OrderReserving, "")
	var order store.Order
	err := workflow.ExecuteActivity(p.storeCtx(ctx, fmt.Sprintf("Reserve %d × %s for order %s (amount %d)", p.in.Quantity, p.in.ProductID, p.in.OrderID, p.in.Amount)),
		a.Reserve, activities.ReserveInput{OrderID: p.in.OrderID, ProductID: p.in.ProductID, Quantity: p.in.Quantity,
			Amount: p.in.Amount, UserID: p.in.UserID}).Get(ctx, &order)
	switch {
	case ctx.Err() != nil:
		return p.cancelled(ctx)
	case isType(err, activities.ErrOutOfStock, activities.ErrUnknownProduct):
		p.state.Reason = errorType(err)
		p.setStatus(ctx, status.OrderRejected, "")
		p.log.Info("order rejected", "reason", p.state.Reason)
		return p.state, nil
	case err != nil:
		return p.state, err
	}

	p.setStatus(ctx, status.OrderRequesting, status.PaymentRequested)
	sent, err := p.send(ctx, p.tuning.RequestAttempts)
	if ctx.Err() != nil {
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
		return p.deadlinePassed(ctx)
	}
	return p.settle(ctx, *p.outcome, "definitive answer")
}

type sendResult int

const (
	sendAccepted sendResult = iota
	sendUnknown
	sendRejected
	sendUnreachable
)

// send runs the create activity with up to budget tries and classifies how
// it ended.
func (p *payment) send(ctx workflow.Context, budget int) (sendResult, error) {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: p.tuning.RequestTimeout,
		// An operator's cancel must not leave a create on the wire behind our
		// back: wait for it to end, then compensation knows what to look for.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumAttempts:    int32(budget),
			// The activity already marks these non-retryable; listing them
			// again guards against a future activity that forgets.
			NonRetryableErrorTypes: []string{activities.ErrGatewayOutcomeUnknown, activities.ErrGatewayRejected,
				activities.ErrIllegalTransition, activities.ErrInvalidOrder},
		},
		Summary: fmt.Sprintf("Charge %d for order %s (%s card, up to %d tries)", p.in.Amount, p.in.OrderID, p.in.CardType, budget),
	}
	var res activities.RequestResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.RequestPayment, activities.RequestInput{
		OrderID: p.in.OrderID, Amount: p.in.Amount, UserID: p.in.UserID, CardType: p.in.CardType, CardNo: p.in.CardNo,
	}).Get(ctx, &res)
	if err == nil {
		p.state.Attempts += res.Attempt
		p.maybeAtGateway = true
		p.track(res.TransactionKey)
		p.state.TransactionKey = res.TransactionKey
		p.setStatus(ctx, status.OrderPending, status.PaymentPending)
		return sendAccepted, nil
	}
	if ctx.Err() != nil {
		// Cancelled while sending: whatever happened, look for it when compensating.
		p.maybeAtGateway = true
		return 0, err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var failure activities.RequestFailure
		if appErr.HasDetails() {
			_ = appErr.Details(&failure)
		}
		p.state.Attempts += max(failure.Attempt, 1)
		switch appErr.Type() {
		case activities.ErrGatewayUnreachable:
			return sendUnreachable, nil
		case activities.ErrGatewayRejected:
			p.state.Reason = failure.Code
			p.setStatus(ctx, "", status.PaymentFailed)
			return sendRejected, nil
		case activities.ErrGatewayOutcomeUnknown, activities.ErrGatewayUnknownKeyed:
		default:
			return 0, err
		}
	} else {
		// The activity itself timed out on every try: whatever it sent, we
		// cannot prove it never arrived.
		p.state.Attempts++
	}
	p.maybeAtGateway = true
	p.unknownSince = workflow.Now(ctx)
	p.setStatus(ctx, status.OrderPending, status.PaymentUnknown)
	p.log.Warn("create outcome unknown; looking the order up instead of re-sending", "error", err)
	return sendUnknown, nil
}

type awaitEnd int

const (
	endOutcome awaitEnd = iota
	endDeadline
	endCancelled
)

// await waits for the first definitive answer, polling with backoff.
func (p *payment) await(ctx workflow.Context) awaitEnd {
	timerCtx, cancelTimers := workflow.WithCancel(ctx)
	defer cancelTimers()
	deadline := workflow.NewTimerWithOptions(timerCtx, max(p.state.Deadline.Sub(workflow.Now(ctx)), 0),
		workflow.TimerOptions{Summary: "order deadline"})
	delay := p.tuning.PollInitial
	poll := workflow.NewTimerWithOptions(timerCtx, delay, workflow.TimerOptions{Summary: "next status poll"})
	for p.outcome == nil {
		var pollDue, deadlineDue bool
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(p.callbacks, func(c workflow.ReceiveChannel, _ bool) {
			var cb gateway.Transaction
			c.Receive(ctx, &cb)
			p.onCallback(ctx, cb)
		})
		sel.AddFuture(poll, func(workflow.Future) { pollDue = true })
		sel.AddFuture(deadline, func(workflow.Future) { deadlineDue = true })
		sel.Select(ctx)
		switch {
		case ctx.Err() != nil:
			return endCancelled
		case p.outcome != nil:
		case deadlineDue:
			return endDeadline
		case pollDue:
			p.poll(ctx)
			if p.outcome == nil && p.resendDue(ctx) {
				p.resend(ctx)
			}
			if ctx.Err() != nil {
				return endCancelled
			}
			delay = min(delay*2, p.tuning.PollMax)
			poll = workflow.NewTimerWithOptions(timerCtx, delay, workflow.TimerOptions{Summary: "next status poll"})
		}
	}
	return endOutcome
}

// resendDue: the latest create's outcome is unknown, the grace period has
// passed and the gateway still knows no transaction of this order — so it
// never took the request, and sending again cannot charge twice.
func (p *payment) resendDue(ctx workflow.Context) bool {
	return p.state.TransactionKey == "" && len(p.keys) == 0 &&
		p.state.LastLookup != nil && p.state.LastLookup.Result == lookupNotFound &&
		workflow.Now(ctx).Sub(p.unknownSince) >= p.tuning.UnknownGrace &&
		p.state.Attempts < p.tuning.RequestAttempts
}

func (p *payment) resend(ctx workflow.Context) {
	p.log.Info("no transaction after the grace period; sending the create again", "attempts", p.state.Attempts)
	p.record(ctx, store.KindAnomaly, "create re-sent: no transaction at the gateway after the grace period", nil)
	p.setStatus(ctx, "", status.PaymentRequested)
	sent, err := p.send(ctx, p.tuning.RequestAttempts-p.state.Attempts)
	switch {
	case err != nil:
		p.log.Error("re-send failed", "error", err)
	case sent == sendRejected:
		p.outcome = &gateway.Transaction{OrderID: p.in.OrderID, Amount: p.in.Amount, Status: gateway.StatusFailed, Reason: p.state.Reason}
	case sent == sendUnreachable:
		// Still nothing at the gateway: keep waiting for the deadline.
		p.setStatus(ctx, "", status.PaymentUnknown)
	}
}

// Lookup results besides the gateway's statuses.
const (
	lookupNotFound    = "NOT_FOUND"
	lookupUnavailable = "UNAVAILABLE"
	lookupError       = "ERROR"
)

// poll asks the gateway, through the worker's breaker, what it knows.
func (p *payment) poll(ctx workflow.Context) {
	in := activities.LookupInput{OrderID: p.in.OrderID, TransactionKey: p.state.TransactionKey}
	summary := fmt.Sprintf("Look up payment %s of order %s (amount %d)", in.TransactionKey, p.in.OrderID, p.in.Amount)
	if in.TransactionKey == "" {
		summary = fmt.Sprintf("Find order %s's transactions at the gateway (amount %d; create outcome unknown)", p.in.OrderID, p.in.Amount)
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: p.tuning.LookupTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrLookupUnavailable, activities.ErrGatewayRejected}},
		Summary: summary,
	}
	var res activities.LookupResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.LookupPayment, in).Get(ctx, &res)
	now := workflow.Now(ctx)
	switch {
	case ctx.Err() != nil:
		return
	case err == nil:
		p.state.LastLookup = &Lookup{At: now, Result: lookupNotFound}
		if tx, ok := p.mine(res.Transactions); ok {
			p.state.LastLookup.Result = tx.Status
		}
		p.onTransactions(ctx, res.Transactions, "lookup")
	case isType(err, activities.ErrLookupUnavailable):
		// "We cannot look right now" — not "the payment failed".
		p.state.LastLookup = &Lookup{At: now, Result: lookupUnavailable, Detail: "lookup breaker open"}
	default:
		p.state.LastLookup = &Lookup{At: now, Result: lookupError, Detail: err.Error()}
	}
}

// mine picks the transaction that speaks for the order: a SUCCESS first;
// then one still PENDING, since no failure is final while another create
// may yet charge; then the one we track; then any.
func (p *payment) mine(txs []gateway.Transaction) (gateway.Transaction, bool) {
	for _, want := range []string{gateway.StatusSuccess, gateway.StatusPending} {
		for _, tx := range txs {
			if tx.Status == want {
				return tx, true
			}
		}
	}
	for _, tx := range txs {
		if tx.TransactionKey == p.state.TransactionKey {
			return tx, true
		}
	}
	if len(txs) > 0 {
		return txs[0], true
	}
	return gateway.Transaction{}, false
}

// onCallback handles one gateway-callback signal.
func (p *payment) onCallback(ctx workflow.Context, cb gateway.Transaction) {
	if cb.OrderID != p.in.OrderID || cb.Amount != p.in.Amount {
		p.log.Warn("callback rejected: other order or amount", "callback_order_id", cb.OrderID, "callback_amount", cb.Amount)
		p.record(ctx, store.KindAnomaly, "callback rejected: it carries another order id or amount",
			map[string]any{"callback_order_id": cb.OrderID, "callback_amount": cb.Amount, "transaction_key": cb.TransactionKey})
		return
	}
	p.onTransactions(ctx, []gateway.Transaction{cb}, "callback")
}

// onTransactions learns from what the gateway says of the order's
// transactions: new keys are tracked, a definitive status decides.
func (p *payment) onTransactions(ctx workflow.Context, txs []gateway.Transaction, source string) {
	var mine []gateway.Transaction
	for _, tx := range txs {
		if tx.OrderID != p.in.OrderID {
			p.record(ctx, store.KindAnomaly, "gateway returned another order's transaction",
				map[string]any{"transaction_key": tx.TransactionKey, "other_order_id": tx.OrderID})
			continue
		}
		mine = append(mine, tx)
		p.track(tx.TransactionKey)
		if tx.Status == gateway.StatusFailed || tx.Status == gateway.StatusCancelled {
			p.closed[tx.TransactionKey] = true
		}
	}
	tx, ok := p.mine(mine)
	if !ok {
		return
	}
	if p.state.TransactionKey == "" && p.outcome == nil {
		p.state.TransactionKey = tx.TransactionKey
		p.maybeAtGateway = true
		p.settleStep(ctx, activities.SettleInput{OrderID: p.in.OrderID, Payment: status.PaymentPending,
			TransactionKey: tx.TransactionKey, Cause: "transaction found by " + source})
		p.setStatus(ctx, status.OrderPending, status.PaymentPending)
	}
	switch tx.Status {
	case gateway.StatusSuccess, gateway.StatusFailed, gateway.StatusCancelled:
		p.decide(ctx, tx, source)
	}
}

// decide takes the first definitive answer; every later one that disagrees
// (or repeats) is an anomaly, recorded and ignored.
func (p *payment) decide(ctx workflow.Context, tx gateway.Transaction, source string) {
	if tx.Status == gateway.StatusCancelled {
		// Cancelled by someone else at the gateway: nothing will be charged.
		tx.Status, tx.Reason = gateway.StatusFailed, "CANCELLED_AT_GATEWAY"
	}
	if p.outcome == nil {
		p.outcome = &tx
		p.log.Info("definitive answer", "source", source, "status", tx.Status, "transaction_key", tx.TransactionKey)
		return
	}
	detail := map[string]any{"source": source, "transaction_key": tx.TransactionKey, "status": tx.Status,
		"decided_key": p.outcome.TransactionKey, "decided_status": p.outcome.Status}
	if tx.TransactionKey == p.outcome.TransactionKey && tx.Status == p.outcome.Status {
		p.record(ctx, store.KindAnomaly, "duplicate answer ignored", detail)
		return
	}
	p.record(ctx, store.KindAnomaly, "contradicting answer ignored", detail)
}

// settle records the definitive answer: SUCCESS sells the stock, FAILED
// gives it back. It runs disconnected: once the gateway has answered, an
// operator's cancel must not leave the order half-recorded.
func (p *payment) settle(ctx workflow.Context, tx gateway.Transaction, cause string) (State, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if tx.Status == gateway.StatusSuccess {
		p.state.TransactionKey = tx.TransactionKey
		if err := p.settleStep(dctx, activities.SettleInput{OrderID: p.in.OrderID, Order: status.OrderConfirmed,
			Payment: status.PaymentSuccess, TransactionKey: tx.TransactionKey, Reservation: store.CommitReservation,
			Cause: "payment SUCCESS: " + cause}); err != nil {
			return p.state, err
		}
		p.setStatus(dctx, status.OrderConfirmed, status.PaymentSuccess)
		// Any other live transaction of this order could become a second charge.
		others := slices.DeleteFunc(slices.Clone(p.keys), func(k string) bool { return k == tx.TransactionKey || p.closed[k] })
		if len(others) > 0 {
			p.record(dctx, store.KindAnomaly, "order has other transactions; cancelling them", map[string]any{"transaction_keys": others})
			p.cancelAtGateway(dctx, others, false)
		}
	} else {
		p.state.Reason = tx.Reason
		if err := p.settleStep(dctx, activities.SettleInput{OrderID: p.in.OrderID, Order: status.OrderFailed,
			Payment: status.PaymentFailed, TransactionKey: tx.TransactionKey, Reason: tx.Reason,
			Reservation: store.ReleaseReservation, Cause: "payment FAILED: " + cause}); err != nil {
			return p.state, err
		}
		p.setStatus(dctx, status.OrderFailed, status.PaymentFailed)
	}
	p.drainLate(dctx)
	return p.state, nil
}

// deadlinePassed: one last look, then confirm or compensate.
func (p *payment) deadlinePassed(ctx workflow.Context) (State, error) {
	p.log.Info("deadline passed; last lookup before compensation")
	p.drainCallbacks(ctx)
	if p.outcome == nil {
		p.poll(ctx)
	}
	if p.outcome != nil {
		return p.settle(ctx, *p.outcome, "found at the deadline")
	}
	return p.compensate(ctx, "deadline passed without a definitive answer")
}

// cancelled is an operator's cancel: compensate, then end as cancelled.
func (p *payment) cancelled(ctx workflow.Context) (State, error) {
	p.log.Info("workflow cancelled by an operator; compensating")
	if _, err := p.compensate(ctx, "cancelled by an operator"); err != nil {
		return p.state, err
	}
	return p.state, temporal.NewCanceledError("order cancelled by an operator; compensation done")
}

// compensate cancels whatever the gateway may hold for this order, releases
// the stock and ends the order CANCELLED — on a disconnected context, so it
// also runs when the workflow itself is being cancelled.
func (p *payment) compensate(ctx workflow.Context, cause string) (State, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	payment := status.PaymentCancelled
	if len(p.keys) > 0 || p.maybeAtGateway {
		res, err := p.cancelAtGateway(dctx, p.keys, p.maybeAtGateway)
		if err != nil {
			return p.state, err
		}
		if res.Refunded > 0 {
			payment = status.PaymentRefunded
		}
	}
	if p.state.Attempts == 0 && !p.maybeAtGateway {
		payment = "" // nothing was ever sent: there is no payment to close
	}
	err := workflow.ExecuteActivity(p.storeCtx(dctx, fmt.Sprintf("Cancel order %s (amount %d) and release %d × %s", p.in.OrderID, p.in.Amount, p.in.Quantity, p.in.ProductID)),
		a.CancelOrder, activities.SettleInput{OrderID: p.in.OrderID, Payment: payment, Cause: cause}).Get(dctx, nil)
	if err != nil {
		return p.state, err
	}
	p.state.Reason = cause
	p.setStatus(dctx, status.OrderCancelled, payment)
	p.drainLate(dctx)
	return p.state, nil
}

// cancelAtGateway cancels transactions until the gateway acknowledges.
func (p *payment) cancelAtGateway(ctx workflow.Context, keys []string, searchByOrder bool) (activities.CancelResult, error) {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:             fmt.Sprintf("Cancel order %s's payment of %d at the gateway (refund if charged)", p.in.OrderID, p.in.Amount),
	}
	var res activities.CancelResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.CancelPayments,
		activities.CancelInput{OrderID: p.in.OrderID, TransactionKeys: keys, SearchByOrder: searchByOrder}).Get(ctx, &res)
	for _, tx := range res.Transactions {
		p.compensated = append(p.compensated, tx.TransactionKey)
		p.track(tx.TransactionKey)
	}
	return res, err
}

// drainCallbacks handles callbacks already delivered but not yet read.
func (p *payment) drainCallbacks(ctx workflow.Context) {
	var cb gateway.Transaction
	for p.callbacks.ReceiveAsync(&cb) {
		p.onCallback(ctx, cb)
		cb = gateway.Transaction{}
	}
}

// drainLate reads callbacks that arrived while the order was being settled.
// A SUCCESS that is not the order's own confirmed charge, and that the
// compensation did not already cancel, took money for nothing: it is
// refunded now, never dropped.
func (p *payment) drainLate(ctx workflow.Context) {
	var cb gateway.Transaction
	for p.callbacks.ReceiveAsync(&cb) {
		ours := p.state.Status == status.OrderConfirmed && cb.TransactionKey == p.state.TransactionKey
		if cb.Status == gateway.StatusSuccess && cb.OrderID == p.in.OrderID && !ours && !slices.Contains(p.compensated, cb.TransactionKey) {
			p.record(ctx, store.KindAnomaly, "SUCCESS arrived after the order was settled "+string(p.state.Status)+"; refunding",
				map[string]any{"transaction_key": cb.TransactionKey})
			if _, err := p.cancelAtGateway(ctx, []string{cb.TransactionKey}, false); err == nil && p.state.Status != status.OrderConfirmed {
				_ = p.settleStep(ctx, activities.SettleInput{OrderID: p.in.OrderID, Payment: status.PaymentRefunded,
					Cause: "late SUCCESS refunded"})
				p.setStatus(ctx, "", status.PaymentRefunded)
			}
		} else {
			p.onCallback(ctx, cb)
		}
		cb = gateway.Transaction{}
	}
}

func (p *payment) track(key string) {
	if key != "" && !slices.Contains(p.keys, key) {
		p.keys = append(p.keys, key)
	}
}

// setStatus updates the query state and the search attributes together.
func (p *payment) setStatus(ctx workflow.Context, order status.Order, pay status.Payment) {
	if order != "" {
		p.state.Status = order
	}
	if pay != "" {
		p.state.PaymentStatus = pay
	}
	updates := []temporal.SearchAttributeUpdate{OrderStatusKey.ValueSet(string(p.state.Status))}
	if p.state.PaymentStatus != "" {
		updates = append(updates, PaymentStatusKey.ValueSet(string(p.state.PaymentStatus)))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		p.log.Warn("upsert search attributes", "error", err)
	}
}

// storeCtx gives a database activity its options: retried on anything but
// the store's declared refusals.
func (p *payment) storeCtx(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrOutOfStock, activities.ErrUnknownProduct, activities.ErrIllegalTransition, activities.ErrInvalidOrder}},
		Summary: summary,
	})
}

func (p *payment) settleStep(ctx workflow.Context, in activities.SettleInput) error {
	summary := fmt.Sprintf("Record order %s (amount %d): %s", p.in.OrderID, p.in.Amount, in.Cause)
	err := workflow.ExecuteActivity(p.storeCtx(ctx, summary), a.Settle, in).Get(ctx, nil)
	if err != nil {
		p.log.Error("settle step failed", "cause", in.Cause, "error", err)
	}
	return err
}

// record appends to the order's event log; losing a note is not worth
// failing the payment over, so errors are logged only.
func (p *payment) record(ctx workflow.Context, kind, cause string, detail map[string]any) {
	if kind == store.KindAnomaly {
		p.state.Anomalies++
	}
	err := workflow.ExecuteActivity(p.storeCtx(ctx, fmt.Sprintf("Note on order %s (amount %d): %s", p.in.OrderID, p.in.Amount, cause)),
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
