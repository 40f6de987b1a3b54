package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Observer is told of every gateway call and every charge refunded; the
// worker turns them into metrics.
type Observer interface {
	GatewayCall(endpoint, outcome string, took time.Duration)
	// BreakerRefused is a lookup or create the breaker refused (state: the
	// breaker's state as it refused, as gobreaker spells it): took is the
	// whole activity, from its start to its answer.
	BreakerRefused(endpoint, state string, took time.Duration)
	// ChargeRefunded is told once per charge a cancel refunded: a SUCCESS
	// the order could not keep (it landed late, or was a second one).
	ChargeRefunded()
}

// Gateway call outcome classes, as the metrics label them.
const (
	OutcomeOK          = "ok"
	OutcomeUnreachable = "unreachable"
	OutcomeUnknown     = "unknown"
	OutcomeRejected    = "rejected"
	OutcomeBreakerOpen = "breaker_open"
)

type nopObserver struct{}

func (nopObserver) GatewayCall(string, string, time.Duration)    {}
func (nopObserver) BreakerRefused(string, string, time.Duration) {}
func (nopObserver) ChargeRefunded()                              {}

// Config is how the activities talk to the world.
type Config struct {
	CallbackURL string // where the gateway should call back
	// IdempotencyKeys sends an Idempotency-Key derived from the order id with
	// every create, for gateways that honour it; retries then widen to
	// unknown outcomes.
	IdempotencyKeys bool
	// Creates is the request breaker every create goes through; nil is
	// none (tests of the create rules alone).
	Creates *breaker.Breaker
	// CancelRequested says whether a workflow run has an operator's cancel
	// request pending; nil asks nothing (tests of the create rules alone).
	// A create retried by the server may start after the cancel arrived and
	// before the workflow has taken it: it is held, never sent.
	CancelRequested func(ctx context.Context, workflowID, runID string) (bool, error)
	// CallbackSecret is the gateway's callback signing secret, which
	// VerifyCallback checks a callback signal's body against.
	CallbackSecret []byte
}

// Activities are the payment activities. Build them with New.
type Activities struct {
	store   *store.Store
	gateway *gateway.Client
	lookups *breaker.Breaker
	cfg     Config
	observe Observer
}

// New builds the activities. observer may be nil.
func New(s *store.Store, g *gateway.Client, lookups *breaker.Breaker, cfg Config, observer Observer) *Activities {
	if observer == nil {
		observer = nopObserver{}
	}
	return &Activities{store: s, gateway: g, lookups: lookups, cfg: cfg, observe: observer}
}

// IdempotencyKey is the key every create of an order carries in key mode.
func IdempotencyKey(orderID string) string { return "payguard-order-" + orderID }

func nonRetryable(kind string, err error, details ...any) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), kind, err, details...)
}

func retryable(kind string, err error, details ...any) error {
	return temporal.NewApplicationErrorWithCause(err.Error(), kind, err, details...)
}

// paced is a retryable error whose retry comes after delay.
func paced(kind string, err error, delay time.Duration, details ...any) error {
	return temporal.NewApplicationErrorWithOptions(err.Error(), kind, temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: delay,
		Details: details})
}

// storeError gives store refusals their declared types; anything else
// (a lost connection) stays retryable.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrIllegalTransition), errors.Is(err, store.ErrReservationSettled):
		var te *store.TransitionError
		if errors.As(err, &te) {
			return nonRetryable(ErrIllegalTransition, err, Transition{Entity: te.Entity, From: te.From, To: te.To})
		}
		return nonRetryable(ErrIllegalTransition, err)
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrOrderMismatch), errors.Is(err, store.ErrNotFound):
		return nonRetryable(ErrInvalidOrder, err)
	case errors.Is(err, store.ErrMaybeSent):
		return nonRetryable(ErrGatewayNotSearched, err)
	}
	return err
}

// Reserve opens the order and holds its stock.
func (a *Activities) Reserve(ctx context.Context, in ReserveInput) (ReserveResult, error) {
	o, err := a.store.Reserve(ctx, store.NewOrder{OrderID: in.OrderID, ProductID: in.ProductID, Quantity: in.Quantity,
		Amount: in.Amount, UserID: in.UserID, Deadline: in.Deadline})
	res := ReserveResult{Order: o}
	switch {
	case errors.Is(err, store.ErrOutOfStock):
		return res, nonRetryable(ErrOutOfStock, err)
	case errors.Is(err, store.ErrUnknownProduct):
		return res, nonRetryable(ErrUnknownProduct, err)
	case err != nil:
		return res, storeError(err)
	}
	if o.Attempts > 0 { // a repeat, after creates: only then is the list read
		attempts, err := a.store.Attempts(ctx, in.OrderID)
		if err != nil {
			return res, storeError(err)
		}
		res.MaybeSent = slices.ContainsFunc(attempts, store.Attempt.MaybeSent)
		res.Resends = resends(attempts)
	}
	return res, nil
}

// VerifyCallback checks that a callback signal carries a body the gateway
// signed, and returns what that body says: a workflow believes nothing
// else of a signal, which anyone who can signal the namespace may send. It
// runs as a local activity (no I/O; its verdict is recorded, so a secret
// rotated later cannot change a replay).
func (a *Activities) VerifyCallback(_ context.Context, in gateway.SignedCallback) (gateway.Transaction, error) {
	tx, err := in.Open(a.cfg.CallbackSecret)
	if err != nil {
		return gateway.Transaction{}, nonRetryable(ErrUnverifiedCallback, err)
	}
	return tx, nil
}

// LookupPayment asks the gateway what it knows, through the breaker.
func (a *Activities) LookupPayment(ctx context.Context, in LookupInput) (LookupResult, error) {
	ctx = gateway.WithUser(ctx, in.UserID)
	endpoint := "lookup"
	if in.TransactionKey == "" {
		endpoint = "lookup-by-order"
	}
	start := time.Now()
	called := start // when the latest breaker call began: a refusal is timed from it
	var res LookupResult
	// One gateway call a breaker call: a fleet breaker's lease is sized
	// for one (MaxCallTime), and a half-open trial must not outlive it.
	err := a.lookups.Do(func() error {
		if in.TransactionKey != "" {
			tx, err := a.gateway.Payment(ctx, in.TransactionKey)
			res = LookupResult{Transactions: []gateway.Transaction{tx}}
			return err
		}
		txs, err := a.gateway.PaymentsByOrder(ctx, in.OrderID)
		res = LookupResult{Transactions: txs.Transactions}
		return err
	})
	// The by-order lines carry no amount: each is read by key, so that
	// only the order's own amount can speak for it (ofTheOrder).
	for i := 0; err == nil && i < len(res.Transactions); i++ {
		if tx := &res.Transactions[i]; tx.Amount == 0 {
			called = time.Now()
			err = a.lookups.Do(func() error {
				full, err := a.gateway.Payment(ctx, tx.TransactionKey)
				tx.Amount = full.Amount
				return err
			})
		}
	}
	took := time.Since(start)
	var open *breaker.OpenError
	switch {
	case errors.As(err, &open):
		// Timed from the refused call, not the lookup: a read by key
		// refused after the search went to the gateway is still an
		// answer from memory (payguard_breaker_refusal_duration_seconds).
		defer a.refused(endpoint, open, called)
		a.observe.GatewayCall(endpoint, OutcomeBreakerOpen, time.Since(called))
		delay, _ := breaker.RetryDelay(err)
		return LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable: "+err.Error(), ErrLookupUnavailable,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{Unavailable{RetryAfter: delay}}})
	case err == nil:
		a.observe.GatewayCall(endpoint, OutcomeOK, took)
		return a.ofTheOrder(ctx, in.OrderID, res.Transactions)
	case in.TransactionKey != "" && gateway.NoSuchTransaction(err):
		// The gateway's own word that it has no transaction of this key: a
		// definite, empty answer.
		a.observe.GatewayCall(endpoint, OutcomeRejected, took)
		return LookupResult{Transactions: []gateway.Transaction{}}, nil
	case gateway.IsNotFound(err):
		// Any other 404 proves nothing: the lookup by order id answers an
		// unknown order with 200 and an empty list, so a 404 there (or one
		// on a key without the gateway's NOT_FOUND) is a route that is not
		// there — a proxy, a deploy, an injected fault. Taken for "no
		// transaction", it would grant a re-send beside a live charge: it
		// is a lookup that failed, and retried.
		a.observe.GatewayCall(endpoint, OutcomeRejected, took)
		return LookupResult{}, retryable(ErrLookupFailed, err)
	case errors.Is(err, gateway.ErrInvalidRequest):
		// Never sent: our bug, which no retry mends.
		return LookupResult{}, nonRetryable(ErrInvalidOrder, err)
	case errors.Is(err, gateway.ErrRejected):
		a.observe.GatewayCall(endpoint, OutcomeRejected, took)
		return LookupResult{}, nonRetryable(ErrGatewayRejected, err)
	case errors.Is(err, gateway.ErrUnreachable):
		a.observe.GatewayCall(endpoint, OutcomeUnreachable, took)
	default:
		a.observe.GatewayCall(endpoint, OutcomeUnknown, took)
	}
	return LookupResult{}, retryable(ErrLookupFailed, err)
}

// ofTheOrder keeps the transactions that may speak for the order: those of
// its amount. Anyone who can create at the gateway can make a transaction
// under the order's id (pgsim and the Loopers simulator ask for no
// credentials), and every create of the order asks for its amount: one of
// another amount is not the order's, must never confirm or fail it, nor
// stand in the way of a re-send. It is left out (LookupResult.Others),
// logged, and recorded once as an ANOMALY on the order's event log.
func (a *Activities) ofTheOrder(ctx context.Context, orderID string, txs []gateway.Transaction) (LookupResult, error) {
	res := LookupResult{Transactions: []gateway.Transaction{}}
	if len(txs) == 0 {
		return res, nil
	}
	o, err := a.store.GetOrder(ctx, orderID)
	if err != nil {
		return LookupResult{}, storeError(err)
	}
	var events []store.Event
	for _, tx := range txs {
		if tx.Amount == o.Amount {
			res.Transactions = append(res.Transactions, tx)
			continue
		}
		res.Others = append(res.Others, tx)
		activity.GetLogger(ctx).Warn("transaction of another amount under the order's id left out", "order_id", orderID,
			"transaction_key", tx.TransactionKey, "amount", tx.Amount, "order_amount", o.Amount, "gateway_status", tx.Status)
		if events == nil {
			if events, err = a.store.Events(ctx, orderID); err != nil {
				return LookupResult{}, err
			}
		}
		if recorded(events, causeOtherAmount, tx) {
			continue
		}
		err := a.store.RecordEvent(ctx, store.Event{OrderID: orderID, Kind: store.KindAnomaly, Cause: causeOtherAmount,
			Detail: map[string]any{"transaction_key": tx.TransactionKey, "amount": tx.Amount, "order_amount": o.Amount,
				"gateway_status": tx.Status}})
		if err != nil {
			return LookupResult{}, storeError(err)
		}
	}
	return res, nil
}

// causeOtherAmount is the ANOMALY a lookup records for a transaction of
// another amount under the order's id.
const causeOtherAmount = "transaction of another amount under the order's id: not the order's, left out of the lookup"

// recorded: events hold an anomaly of this cause for tx in its status.
func recorded(events []store.Event, cause string, tx gateway.Transaction) bool {
	return slices.ContainsFunc(events, func(e store.Event) bool {
		return e.Kind == store.KindAnomaly && e.Cause == cause && e.Detail["transaction_key"] == tx.TransactionKey &&
			e.Detail["gateway_status"] == tx.Status
	})
}

// CancelPayments cancels the order's transactions at the gateway. It fails
// (and is retried) until every cancel is acknowledged.
func (a *Activities) CancelPayments(ctx context.Context, in CancelInput) (CancelResult, error) {
	if err := a.refundAllowed(ctx, in); err != nil {
		return CancelResult{}, err
	}
	ctx = gateway.WithUser(ctx, in.UserID)
	keys := append([]string(nil), in.TransactionKeys...)
	var searchedAt time.Time
	var amount int64 // the order's, when the search may find what is not of it
	if in.SearchByOrder {
		o, err := a.store.GetOrder(ctx, in.OrderID)
		switch {
		case err == nil:
			amount = o.Amount
		case !errors.Is(err, store.ErrNotFound):
			return CancelResult{}, storeError(err)
		}
		// The database's clock before the search: a create answered after
		// it may have reached the gateway after the search looked.
		if searchedAt, err = a.store.Now(ctx); err != nil {
			return CancelResult{}, fmt.Errorf("read the database's clock: %w", err)
		}
		start := time.Now()
		found, err := a.gateway.PaymentsByOrder(ctx, in.OrderID)
		a.observe.GatewayCall("lookup-by-order", outcomeOf(err), time.Since(start))
		if err != nil {
			return CancelResult{}, retryable(ErrLookupFailed, err)
		}
		for _, tx := range found.Transactions {
			if !slices.Contains(keys, tx.TransactionKey) {
				keys = append(keys, tx.TransactionKey)
			}
		}
	}
	out := CancelResult{Transactions: []gateway.Transaction{}, SearchedAt: searchedAt}
	for _, key := range keys {
		// Every key here is one the database or the search by order id
		// knows: a 404 on it (a proxy, a route, a fault) is no word that
		// the transaction is gone, and skipping it would end the order
		// CANCELLED with its transaction live. It is retried.
		before, err := a.gateway.Payment(ctx, key)
		if err != nil {
			return CancelResult{}, retryable(ErrLookupFailed, err)
		}
		if amount != 0 && before.Amount != amount && !slices.Contains(in.TransactionKeys, key) {
			// Found by the search, of another amount: not the order's
			// (ofTheOrder), so neither cancelled nor counted as its refund;
			// the sweep flags it.
			activity.GetLogger(ctx).Warn("transaction of another amount under the order's id left alone", "order_id", in.OrderID,
				"transaction_key", key, "amount", before.Amount, "order_amount", amount)
			continue
		}
		start := time.Now()
		tx, err := a.gateway.Cancel(ctx, key)
		a.observe.GatewayCall("cancel", outcomeOf(err), time.Since(start))
		if err != nil {
			return CancelResult{}, retryable("CancelFailed", err)
		}
		if before.Status == gateway.StatusSuccess || tx.Reason == "REFUNDED" {
			// Charged before this cancel (or an earlier one): refunded. The
			// store counts it once per (order, transaction), whichever net
			// or retry gets here first.
			first, err := a.store.RecordRefund(ctx, in.OrderID, key, before.Amount)
			if err != nil {
				return CancelResult{}, storeError(err)
			}
			if first && !in.Requested {
				a.observe.ChargeRefunded()
			}
			out.Refunded++
		}
		out.Transactions = append(out.Transactions, tx)
		activity.GetLogger(ctx).Info("cancelled at gateway", "order_id", in.OrderID, "transaction_key", key, "status", tx.Status, "reason", tx.Reason)
	}
	return out, nil
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, gateway.ErrUnreachable):
		return OutcomeUnreachable
	case errors.Is(err, gateway.ErrRejected):
		return OutcomeRejected
	}
	return OutcomeUnknown
}

// Settle records a step of the order's life: statuses and reservation
// together (store.Advance).
func (a *Activities) Settle(ctx context.Context, in SettleInput) error {
	return storeError(a.store.Advance(ctx, store.Change{OrderID: in.OrderID, Order: in.Order, Payment: in.Payment,
		TransactionKey: in.TransactionKey, Reason: in.Reason, Reservation: in.Reservation, Cause: in.Cause}))
}

// CancelOrder is the database half of compensation: release the stock if it
// is held, close the payment, order CANCELLED (store.Cancel: a create still
// on the wire is closed UNKNOWN first, and a caller that did not search the
// gateway is refused if a create may have reached it). An order that never
// made it into the database (cancelled while reserving) needs nothing. A
// payment already final the other way (a refusal recorded FAILED) keeps its
// status: the order is cancelled and its stock released all the same,
// rather than left holding stock over a word.
func (a *Activities) CancelOrder(ctx context.Context, in SettleInput) error {
	change := store.Change{OrderID: in.OrderID, Order: status.OrderCancelled, Payment: in.Payment, Reason: in.Reason,
		Reservation: store.ReleaseReservation, Cause: in.Cause}
	check := store.CancelCheck{Unsearched: in.Unsearched, SearchedAt: in.SearchedAt}
	cancel := func() error { return a.store.Cancel(ctx, change, check) }
	err := cancel()
	if errors.Is(err, store.ErrNoReservation) {
		change.Reservation = store.KeepReservation
		err = cancel()
	}
	var te *store.TransitionError
	if errors.As(err, &te) && te.Entity == "payment" {
		activity.GetLogger(ctx).Warn("payment status kept while cancelling", "order_id", in.OrderID, "payment", te.From, "refused", te.To)
		change.Payment, change.Cause = "", fmt.Sprintf("%s (payment kept %s)", in.Cause, te.From)
		err = cancel()
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return storeError(err)
}

// RecordEvent appends to the order's event log.
func (a *Activities) RecordEvent(ctx context.Context, in EventInput) error {
	err := a.store.RecordEvent(ctx, store.Event{OrderID: in.OrderID, Kind: in.Kind, Cause: in.Cause, Detail: in.Detail})
	if errors.Is(err, store.ErrInvalid) {
		return nonRetryable(ErrInvalidOrder, err)
	}
	return err
}

// resends counts the order's creates sent under a grant: re-sends after a
// create whose outcome was unknown (each grant lets one create out).
func resends(attempts []store.Attempt) int {
	n := 0
	for _, a := range attempts {
		if a.Grant != "" {
			n++
		}
	}
	return n
}
