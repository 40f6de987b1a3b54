package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/time/rate"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// The reconciliation sweep's activities (docs/design.md §10): each batch
// compares a page of orders with Temporal and the gateway and names what
// disagrees; the workflow (workflows/reconcile.go) decides what to do.

// Findings, the finding label of payguard_reconcile_findings_total.
const (
	// FindingLateSuccess: a SUCCESS transaction on a FAILED, CANCELLED or REJECTED order.
	FindingLateSuccess = "late_success"
	// FindingSecondSuccess: a SUCCESS other than the order's own on a CONFIRMED order.
	FindingSecondSuccess = "second_success"
	// FindingWorkflowGone: an order not final whose workflow is not running.
	FindingWorkflowGone = "workflow_gone"
	// FindingReservationHeld: a final order whose stock is still HELD.
	FindingReservationHeld = "reservation_held"
	// FindingConfirmedUnpaid: a CONFIRMED order whose transaction is not SUCCESS at the gateway.
	FindingConfirmedUnpaid = "confirmed_unpaid"
	// FindingOtherAmount: a transaction under the order's id of another
	// amount than the order's: not the order's, flagged, money untouched.
	FindingOtherAmount = "other_amount"
)

// Actions, the action label of payguard_reconcile_findings_total.
const (
	ActionRefund  = "refund"  // RefundWorkflow, id RefundWorkflowID: never twice
	ActionRecover = "recover" // RecoverWorkflow under the order's own workflow id
	ActionRelease = "release" // the reservation goes back to stock
	ActionCommit  = "commit"  // the reservation is sold
	ActionFlag    = "flag"    // an anomaly event and the metric, money untouched
)

// FindingActions is every finding with each action the sweep may take on
// it: the worker starts each series of payguard_reconcile_findings_total at
// 0 so an alert's increase() sees the first finding.
var FindingActions = [][2]string{
	{FindingLateSuccess, ActionRefund}, {FindingSecondSuccess, ActionRefund},
	{FindingWorkflowGone, ActionRecover}, {FindingReservationHeld, ActionRelease},
	{FindingReservationHeld, ActionCommit}, {FindingConfirmedUnpaid, ActionFlag},
	{FindingOtherAmount, ActionFlag},
}

// Finding is one disagreement the sweep found, and what it does about it.
type Finding struct {
	OrderID        string       `json:"orderId"`
	UserID         string       `json:"userId,omitempty"`
	OrderStatus    status.Order `json:"orderStatus"`
	Finding        string       `json:"finding"`
	Action         string       `json:"action"`
	TransactionKey string       `json:"transactionKey,omitempty"`
	Amount         int64        `json:"amount,omitempty"`
	GatewayStatus  string       `json:"gatewayStatus,omitempty"`
	// Result is what the action did: "" in a dry run, else done, started,
	// already started, or the error that stopped it.
	Result string `json:"result,omitempty"`
}

// SweepBatchInput asks for one page of the sweep.
type SweepBatchInput struct {
	Since time.Time `json:"since"` // final orders that changed before this are left alone
	Until time.Time `json:"until"` // orders that changed after this (the sweep's start) are the next sweep's
	After Cursor    `json:"after"`
	Limit int       `json:"limit"`
}

// SweepBatchResult is one page's findings and where the next page starts.
type SweepBatchResult struct {
	Findings []Finding `json:"findings"`
	Checked  int       `json:"checked"`
	Next     Cursor    `json:"next"`
	Done     bool      `json:"done"` // the last page
	// Skipped: the lookup breaker was open, so nothing of this page was
	// concluded (an open breaker is "cannot look", never an answer).
	Skipped bool `json:"skipped,omitempty"`
	// Unlooked orders had a lookup fail (not the breaker): left for the next sweep.
	Unlooked int `json:"unlooked,omitempty"`
	// Running orders have a workflow running, which owns them, or had
	// when the page was read and were ended by it before the sweep looked.
	Running int `json:"running,omitempty"`
	// Flagged disagreements were flagged by an earlier sweep.
	Flagged int `json:"flagged,omitempty"`
}

// SweepCount is how many findings of a kind got an action.
type SweepCount struct {
	Finding string `json:"finding"`
	Action  string `json:"action"`
	N       int    `json:"n"`
}

// SweepDoneInput reports a finished sweep to the worker's metrics.
type SweepDoneInput struct {
	StartedAt time.Time     `json:"startedAt"`
	Took      time.Duration `json:"took"`
	Counts    []SweepCount  `json:"counts"`
}

// RecoveryOrder is what a recovery needs of an order whose workflow is gone.
type RecoveryOrder struct {
	Found bool        `json:"found"`
	Order store.Order `json:"order"`
	// Keys are the transactions the order's creates were accepted with.
	Keys []string `json:"keys"`
	// Deadline is the order's own, as Reserve recorded it (zero for an
	// order placed before payguard recorded deadlines).
	Deadline time.Time `json:"deadline,omitempty"`
	// MaybeSent: a create may have reached the gateway (accepted, unknown or
	// still SENDING), so compensation must search the gateway by order id.
	MaybeSent bool `json:"maybeSent"`
	// Resends counts the creates sent under a grant (re-sent after a
	// create whose outcome was unknown): the recovery holds a FAILED after
	// them as PaymentWorkflow does (decide), for a search by order id.
	Resends int `json:"resends,omitempty"`
	// Rejected is the gateway's code when the order's latest create was
	// refused: the payment failed, unless an earlier create may have
	// reached the gateway and a search by order id finds its transaction.
	Rejected string `json:"rejected,omitempty"`
}

// Cursor is where a page of the sweep starts (store.Cursor, named here so
// the workflows need no store of their own).
type Cursor = store.Cursor

// SweepObserver is told of each finished sweep; the worker turns it into metrics.
type SweepObserver interface {
	ReconcileFindings(finding, action string, n int)
	SweepDone(at time.Time, took time.Duration)
}

// Sweeper holds the sweep's activities. Build it with NewSweeper.
type Sweeper struct {
	store   *store.Store
	acts    *Activities
	running Running
	limiter *rate.Limiter
	observe SweepObserver
}

// Running says whether a workflow that owns part of an order runs now:
// its PaymentWorkflow, or the RefundWorkflow of one of its charges.
type Running interface {
	Payment(ctx context.Context, orderID string) (bool, error)
	Refund(ctx context.Context, orderID, transactionKey string) (bool, error)
}

// NewSweeper builds the sweep's activities. Lookups go through acts (its
// lookup breaker) at most perSecond a second for this worker process: a
// token bucket (golang.org/x/time/rate) rather than a hand-written pacer.
// running says whether an order's workflow is running.
func NewSweeper(s *store.Store, acts *Activities, running Running,
	perSecond float64, observer SweepObserver) *Sweeper {
	return &Sweeper{store: s, acts: acts, running: running, limiter: rate.NewLimiter(rate.Limit(perSecond), 1), observe: observer}
}

// SweepBatch reads one page of candidates and compares each with Temporal
// and the gateway. An order whose workflow is running is left to it.
func (w *Sweeper) SweepBatch(ctx context.Context, in SweepBatchInput) (SweepBatchResult, error) {
	page, err := w.store.ReconcileCandidates(ctx, in.Since, in.Until, in.After, in.Limit)
	if err != nil {
		return SweepBatchResult{}, err
	}
	res := SweepBatchResult{Findings: []Finding{}, Next: in.After, Done: len(page) < in.Limit}
	if len(page) > 0 {
		res.Next = page[len(page)-1].Cursor
	}
	for i, c := range page {
		activity.RecordHeartbeat(ctx, i)
		res.Checked++
		running, err := w.running.Payment(ctx, c.OrderID)
		if err != nil {
			return SweepBatchResult{}, fmt.Errorf("is order %s's workflow running: %w", c.OrderID, err)
		}
		if running {
			res.Running++
			continue
		}
		if !c.Status.Final() {
			// The page was read before the look, seconds before when
			// lookups are paced: the order's workflow may have ended it
			// since, and a recovery started now would become the order's
			// latest run over its own. Its status read after the look
			// says: still open, its workflow is gone; final, it ended
			// under the sweep, and the next sweep checks it as a final
			// order (the worker holds --reconcile-window to at least two
			// --reconcile-interval, so that window reaches back to now).
			o, err := w.store.GetOrder(ctx, c.OrderID)
			if err != nil {
				return SweepBatchResult{}, err
			}
			if o.Status.Final() {
				res.Running++
				continue
			}
			res.Findings = append(res.Findings, finding(o, FindingWorkflowGone, ActionRecover))
			continue
		}
		if err := w.limiter.Wait(ctx); err != nil {
			return SweepBatchResult{}, err
		}
		looked, err := w.acts.LookupPayment(ctx, LookupInput{OrderID: c.OrderID, UserID: c.UserID})
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &appErr) && appErr.Type() == ErrLookupUnavailable:
			activity.GetLogger(ctx).Warn("lookup breaker open: batch skipped, nothing concluded", "order_id", c.OrderID)
			return SweepBatchResult{Findings: []Finding{}, Checked: res.Checked, Next: res.Next, Done: res.Done, Skipped: true}, nil
		case err != nil:
			activity.GetLogger(ctx).Warn("lookup failed: order left for the next sweep", "order_id", c.OrderID, "error", err)
			res.Unlooked++
			continue
		}
		for _, f := range Classify(c.Order, append(looked.Transactions, looked.Others...)) {
			if f.Finding == FindingConfirmedUnpaid && f.GatewayStatus == gateway.StatusCancelled {
				// A customer's refund between the gateway's cancel and its
				// record: the refund's workflow owns the order until then.
				refunding, err := w.running.Refund(ctx, f.OrderID, f.TransactionKey)
				if err != nil {
					return SweepBatchResult{}, fmt.Errorf("is order %s's refund running: %w", c.OrderID, err)
				}
				if refunding {
					res.Running++
					continue
				}
			}
			if f.Action == ActionFlag {
				flagged, err := w.store.Flagged(ctx, f.OrderID, f.Finding, f.TransactionKey, f.GatewayStatus)
				if err != nil {
					return SweepBatchResult{}, err
				}
				if flagged {
					res.Flagged++
					continue
				}
			}
			res.Findings = append(res.Findings, f)
		}
	}
	return res, nil
}

// Classify compares a final order with its transactions at the gateway.
// Only these disagreements are fixed; anything else is left as it is:
//   - a final order still HELD: release, or commit if CONFIRMED;
//   - FAILED, CANCELLED or REJECTED with a SUCCESS: refund it;
//   - CONFIRMED whose own transaction is SUCCESS, with another SUCCESS:
//     refund the other, never the order's own;
//   - CONFIRMED and REFUNDED whose own transaction is CANCELLED: as it
//     should be; any SUCCESS is refunded;
//   - CONFIRMED whose own transaction is not SUCCESS: flag, touch no money
//     (another SUCCESS then is not refunded either: which charge is the
//     order's is exactly what is in doubt);
//   - a transaction of another amount than the order's (a known amount:
//     lines of a lookup by order carry none): not the order's, flagged and
//     left out of every rule above; when it is the order's own, nothing
//     else is concluded.
func Classify(o store.Order, txs []gateway.Transaction) []Finding {
	var out []Finding
	if o.Reservation == store.ReservationHeld {
		action := ActionRelease
		if o.Status == status.OrderConfirmed {
			action = ActionCommit
		}
		out = append(out, finding(o, FindingReservationHeld, action))
	}
	var own *gateway.Transaction
	var successes []gateway.Transaction
	otherOwn := false
	for i, tx := range txs {
		if tx.OrderID != o.OrderID {
			continue // another order's: not ours to judge
		}
		if tx.Amount != 0 && tx.Amount != o.Amount {
			out = append(out, charge(o, tx, FindingOtherAmount, ActionFlag))
			if tx.TransactionKey == o.TransactionKey {
				otherOwn = true
			}
			continue
		}
		if tx.TransactionKey == o.TransactionKey {
			own = &txs[i]
		}
		if tx.Status == gateway.StatusSuccess {
			successes = append(successes, tx)
		}
	}
	if otherOwn {
		return out // the order's own charge is not of its amount: decide by hand
	}
	if o.Status != status.OrderConfirmed {
		for _, tx := range successes {
			out = append(out, charge(o, tx, FindingLateSuccess, ActionRefund))
		}
		return out
	}
	if o.PaymentStatus == status.PaymentRefunded && own != nil && own.Status == gateway.StatusCancelled {
		// Refunded in full (at the customer's request), as the books say:
		// any SUCCESS left is a charge for nothing.
		for _, tx := range successes {
			out = append(out, charge(o, tx, FindingSecondSuccess, ActionRefund))
		}
		return out
	}
	if own == nil || own.Status != gateway.StatusSuccess {
		f := finding(o, FindingConfirmedUnpaid, ActionFlag)
		f.TransactionKey, f.GatewayStatus = o.TransactionKey, "NOT_FOUND"
		if own != nil {
			f.GatewayStatus = own.Status
		}
		return append(out, f)
	}
	for _, tx := range successes {
		if tx.TransactionKey != own.TransactionKey {
			out = append(out, charge(o, tx, FindingSecondSuccess, ActionRefund))
		}
	}
	return out
}

func finding(o store.Order, kind, action string) Finding {
	return Finding{OrderID: o.OrderID, UserID: o.UserID, OrderStatus: o.Status, Finding: kind, Action: action, Amount: o.Amount}
}

func charge(o store.Order, tx gateway.Transaction, kind, action string) Finding {
	f := finding(o, kind, action)
	f.TransactionKey, f.GatewayStatus = tx.TransactionKey, tx.Status
	// The lines of a lookup by order carry no amount: the order's stands,
	// which every create of the order asked for.
	if tx.Amount != 0 {
		f.Amount = tx.Amount
	}
	return f
}

// ReadRecoveryOrder reads what a recovery needs: the order and which of its
// creates may have reached the gateway.
func (w *Sweeper) ReadRecoveryOrder(ctx context.Context, orderID string) (RecoveryOrder, error) {
	o, err := w.store.GetOrder(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return RecoveryOrder{}, nil
	}
	if err != nil {
		return RecoveryOrder{}, err
	}
	attempts, err := w.store.Attempts(ctx, orderID)
	if err != nil {
		return RecoveryOrder{}, err
	}
	deadline, err := w.store.Deadline(ctx, orderID)
	if err != nil {
		return RecoveryOrder{}, err
	}
	r := RecoveryOrder{Found: true, Order: o, Keys: []string{}, Deadline: deadline}
	for _, a := range attempts {
		if a.TransactionKey != "" {
			r.Keys = append(r.Keys, a.TransactionKey)
		}
		if a.MaybeSent() {
			r.MaybeSent = true
		}
	}
	r.Resends = resends(attempts)
	if n := len(attempts); n > 0 && attempts[n-1].Outcome == store.OutcomeRejected {
		r.Rejected = attempts[n-1].Reason
	}
	if o.TransactionKey != "" && !slices.Contains(r.Keys, o.TransactionKey) {
		r.Keys = append(r.Keys, o.TransactionKey)
	}
	return r, nil
}

// SweepDone reports a finished sweep: its findings and when it ran.
func (w *Sweeper) SweepDone(_ context.Context, in SweepDoneInput) error {
	if w.observe == nil {
		return nil
	}
	for _, c := range in.Counts {
		w.observe.ReconcileFindings(c.Finding, c.Action, c.N)
	}
	w.observe.SweepDone(in.StartedAt.Add(in.Took), in.Took)
	return nil
}
