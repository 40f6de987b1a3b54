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
)

// Answers from the gateway: status polls through the breaker, callbacks, and
// the rule that picks the definitive one.

// Lookup results besides the gateway's statuses.
const (
	lookupNotFound    = "NOT_FOUND"
	lookupUnavailable = "UNAVAILABLE"
	lookupError       = "ERROR"
)

// poll asks the gateway, through the worker's breaker, what it knows; a
// search (its reason, non-empty) asks for all the order's transactions even
// when one key is known.
func (p *payment) poll(ctx workflow.Context, search string) {
	in := activities.LookupInput{OrderID: p.in.OrderID, TransactionKey: p.state.TransactionKey, UserID: p.in.UserID}
	summary := fmt.Sprintf("Look up payment %s of order %s (amount %d)", in.TransactionKey, p.in.OrderID, p.in.Amount)
	if search != "" {
		in.TransactionKey = ""
		summary = fmt.Sprintf("Find order %s's transactions at the gateway (amount %d; %s)", p.in.OrderID, p.in.Amount, search)
	} else if len(p.keys) > 1 {
		// Several transactions: only all of them together say whether the
		// order is decided (see decide).
		in.TransactionKey = ""
		summary = fmt.Sprintf("Find order %s's %d transactions at the gateway (amount %d)", p.in.OrderID, len(p.keys), p.in.Amount)
	} else if in.TransactionKey == "" {
		summary = fmt.Sprintf("Find order %s's transactions at the gateway (amount %d; create outcome unknown)", p.in.OrderID, p.in.Amount)
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: p.tuning.LookupTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrLookupUnavailable, activities.ErrGatewayRejected}},
		Summary: summary,
	}
	var res activities.LookupResult
	// The lookup speaks of the gateway as it was when asked, not when the
	// answer was read: a slow or retried lookup must not stretch the grant
	// it justifies, nor pass for one made after the grace.
	now := workflow.Now(ctx)
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.LookupPayment, in).Get(ctx, &res)
	p.retryAfter = 0
	switch {
	case ctx.Err() != nil && err != nil:
		return // a result that came back is read under a cancel too (cancelTakes)
	case err == nil:
		p.state.LastLookup = &Lookup{At: now, Result: lookupNotFound}
		if tx, ok := p.mine(res.Transactions); ok {
			p.state.LastLookup.Result = tx.Status
		}
		p.searching = in.TransactionKey == ""
		held := p.heldFailed
		if p.searching {
			p.heldFailed = nil // the search's answers decide, or name a live transaction to wait for
		}
		p.onTransactions(ctx, res.Transactions, "lookup")
		if p.searching && held != nil && held.TransactionKey == "" && p.outcome == nil && !p.anyOfTheOrder(res.Transactions) {
			// A re-send the gateway refused, and no transaction of the
			// order anywhere: the refusal decides — once the grace after
			// it has passed (a hint's or an early poll's search keeps it
			// held), as the gateway may not list a transaction at once.
			if now.Before(p.proofDue) {
				p.heldFailed = held
			} else {
				p.decide(ctx, *held, "create")
			}
		}
		if p.searching && held != nil && held.TransactionKey != "" && p.outcome == nil && p.heldFailed == nil &&
			!slices.ContainsFunc(res.Transactions, func(tx gateway.Transaction) bool { return tx.TransactionKey == held.TransactionKey }) {
			// The gateway said FAILED for a transaction this search does
			// not list (it lists a transaction only a while after making
			// it): the search says nothing of that answer, which stays
			// held — decided by a later search, or at the deadline.
			p.heldFailed = held
		}
		p.searching = false
	case isType(err, activities.ErrLookupUnavailable):
		// "We cannot look right now" — not "the payment failed".
		p.state.LastLookup = &Lookup{At: now, Result: lookupUnavailable, Detail: "lookup breaker open"}
		var appErr *temporal.ApplicationError
		var open activities.Unavailable
		if errors.As(err, &appErr) && appErr.HasDetails() && appErr.Details(&open) == nil {
			p.retryAfter = open.RetryAfter
		}
	default:
		p.state.LastLookup = &Lookup{At: now, Result: lookupError, Detail: err.Error()}
	}
}

// anyOfTheOrder: txs holds a transaction of this order.
func (p *payment) anyOfTheOrder(txs []gateway.Transaction) bool {
	return slices.ContainsFunc(txs, func(tx gateway.Transaction) bool { return tx.OrderID == p.in.OrderID })
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
		p.record(ctx, activities.KindAnomaly, "callback rejected: it carries another order id or amount",
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
			p.record(ctx, activities.KindAnomaly, "gateway returned another order's transaction",
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
	if p.state.TransactionKey == "" && p.outcome == nil && !p.state.Status.Final() {
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
		detail := map[string]any{"source": source, "transaction_key": tx.TransactionKey, "status": tx.Status}
		switch live := p.otherLive(tx.TransactionKey); {
		case p.state.Status.Final():
			p.record(ctx, activities.KindAnomaly, "answer after the order ended "+string(p.state.Status)+" ignored", detail)
			return
		case tx.Status == gateway.StatusFailed && len(live) > 0:
			// Another transaction of the order may still charge: failing
			// now would release the stock under a live charge.
			detail["live_transaction_keys"] = live
			p.record(ctx, activities.KindAnomaly, "FAILED answer while another transaction of the order is live; waiting for it", detail)
			return
		case tx.Status == gateway.StatusFailed && p.resends > 0 && (!p.searching || p.state.LastLookup.At.Before(p.listedBy)):
			// A create was re-sent after one whose outcome was unknown:
			// that one may have made a transaction no answer named (a 500
			// after creating it). The order's transactions decide, found
			// by order id: this answer again, and any other, live or not.
			// (Creates that never reached the gateway — unreachable,
			// refused — are no reason.) A search that cannot be made now
			// leaves the answer held: the next poll searches again, and at
			// the deadline the held FAILED settles the order (deadlinePassed).
			// A search asked inside the latest create's grace (listedBy: a
			// hint's) decides nothing either, however late its answer is
			// read (LastLookup.At is when it was asked): it may miss what
			// the first made.
			p.log.Info("FAILED answer after a re-send; searching the order's transactions first", "source", source,
				"transaction_key", tx.TransactionKey, "resends", p.resends)
			held := tx
			p.heldFailed = &held
			if workflow.Now(ctx).Before(p.listedBy) {
				// Inside the latest create's grace the search may miss what
				// the create before the re-send made: it comes once the
				// grace has passed (pollIn; deadlinePassed waits for it).
				return
			}
			p.poll(ctx, "a FAILED answer after a re-send")
			return
		}
	}
	if p.outcome == nil {
		p.outcome = &tx
		p.log.Info("definitive answer", "source", source, "status", tx.Status, "transaction_key", tx.TransactionKey)
		return
	}
	detail := map[string]any{"source": source, "transaction_key": tx.TransactionKey, "status": tx.Status,
		"decided_key": p.outcome.TransactionKey, "decided_status": p.outcome.Status}
	if tx.TransactionKey == p.outcome.TransactionKey && tx.Status == p.outcome.Status {
		p.record(ctx, activities.KindAnomaly, "duplicate answer ignored", detail)
		return
	}
	p.record(ctx, activities.KindAnomaly, "contradicting answer ignored", detail)
}

// otherLive lists the order's transactions other than key not known to be
// FAILED or CANCELLED.
func (p *payment) otherLive(key string) []string {
	var live []string
	for _, k := range p.keys {
		if k != key && !p.closed[k] {
			live = append(live, k)
		}
	}
	return live
}

// drainCallbacks handles callbacks already delivered but not yet read.
func (p *payment) drainCallbacks(ctx workflow.Context) {
	for {
		cb, ok := p.receiveCallback(ctx)
		if !ok {
			return
		}
		p.onCallback(ctx, cb)
	}
}

// receiveCallback takes the next callback signal the gateway signed, and
// returns what its signed body says (ok false: none left). One it cannot
// verify is recorded as an anomaly and skipped: anyone who can signal the
// namespace can send one. A signal whose payload cannot even be decoded
// (a codec that cannot open it) the SDK drops, logging it, and never
// blocks on: it is read without waiting, after a selector saw it arrive.
func (p *payment) receiveCallback(ctx workflow.Context) (gateway.Transaction, bool) {
	for {
		var cb Callback
		if !p.callbacks.ReceiveAsync(&cb) {
			return gateway.Transaction{}, false
		}
		err := errors.New("unsigned: the signal carries no signed body")
		if cb.Signed != nil {
			// Disconnected: a callback read under an operator's cancel is
			// still the gateway's word, and must be believed if signed.
			dctx, _ := workflow.NewDisconnectedContext(ctx)
			var tx gateway.Transaction
			lctx := workflow.WithLocalActivityOptions(dctx, verifyOptions(p.in.OrderID))
			if err = workflow.ExecuteLocalActivity(lctx, a.VerifyCallback, *cb.Signed).Get(ctx, &tx); err == nil {
				return tx, true
			}
		}
		p.log.Warn("callback signal ignored: not signed by the gateway", "claimed_transaction_key", cb.TransactionKey,
			"claimed_status", cb.Status, "error", err)
		p.record(ctx, activities.KindAnomaly, "callback signal ignored: the gateway did not sign it",
			map[string]any{"claimed_transaction_key": cb.TransactionKey, "claimed_status": cb.Status,
				"claimed_order_id": cb.OrderID, "error": err.Error()})
	}
}
