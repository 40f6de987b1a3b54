package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

func (nopObserver) GatewayCall(string, string, time.Duration) {}
func (nopObserver) ChargeRefunded()                           {}

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

// storeError gives store refusals their declared types; anything else
// (a lost connection) stays retryable.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrIllegalTransition), errors.Is(err, store.ErrReservationSettled):
		return nonRetryable(ErrIllegalTransition, err)
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrOrderMismatch), errors.Is(err, store.ErrNotFound):
		return nonRetryable(ErrInvalidOrder, err)
	}
	return err
}

// Reserve opens the order and holds its stock.
func (a *Activities) Reserve(ctx context.Context, in ReserveInput) (store.Order, error) {
	o, err := a.store.Reserve(ctx, store.NewOrder{OrderID: in.OrderID, ProductID: in.ProductID, Quantity: in.Quantity,
		Amount: in.Amount, UserID: in.UserID, Deadline: in.Deadline})
	switch {
	case errors.Is(err, store.ErrOutOfStock):
		return o, nonRetryable(ErrOutOfStock, err)
	case errors.Is(err, store.ErrUnknownProduct):
		return o, nonRetryable(ErrUnknownProduct, err)
	}
	return o, storeError(err)
}

// RequestPayment sends the create, following the failure table (docs/design.md
// §1) to the letter. The store decides whether a create may go out at all
// (store.BeginAttempt); when it may not, the answer already recorded for the
// order is reported instead.
func (a *Activities) RequestPayment(ctx context.Context, in RequestInput) (RequestResult, error) {
	key := ""
	if a.cfg.IdempotencyKeys {
		key = IdempotencyKey(in.OrderID)
	}
	// A create the client cannot build is our bug, not an outage: refuse it
	// before an attempt is recorded, so it is never counted UNREACHABLE.
	if err := a.gateway.CheckCreate(in.OrderID, in.UserID, key); err != nil {
		return RequestResult{}, nonRetryable(ErrInvalidOrder, err)
	}
	// The request breaker is asked first: a create it refuses is never
	// recorded, so it neither counts against the order's creates nor
	// touches an earlier UNKNOWN (store.BeginAttempt decides all that, and
	// only for a create that may go out now).
	var (
		begun    store.Begun
		beginErr error
		created  gateway.Created
		sendErr  error
		took     time.Duration
	)
	req := store.AttemptRequest{OrderID: in.OrderID, IdempotencyKey: key, CallbackURL: a.cfg.CallbackURL, Grant: in.Grant, Limit: in.Limit}
	send := func() error {
		begun, beginErr = a.store.BeginAttempt(ctx, req)
		if beginErr != nil || !begun.Send {
			return errNotSent
		}
		start := time.Now()
		created, sendErr = a.gateway.CreatePayment(ctx, gateway.CreateRequest{OrderID: in.OrderID, Amount: in.Amount,
			CardType: in.CardType, CardNo: in.CardNo, CallbackURL: begun.CallbackURL}, in.UserID, key)
		took = time.Since(start)
		return sendErr
	}
	var err error
	if a.cfg.Creates != nil {
		err = a.cfg.Creates.Do(send)
	} else {
		err = send()
	}
	if delay, refused := breaker.RetryDelay(err); refused {
		a.observe.GatewayCall("create", OutcomeBreakerOpen, 0)
		// Not sent now says nothing of creates sent before: if the order's
		// attempts already decide the answer (one on the wire, an
		// acceptance), report it as the store's rule would, or a run whose
		// tries are bounded could end on "never sent" with money taken.
		if had, err := a.store.PeekAttempt(ctx, req); err == nil && !had.Send {
			return a.report(ctx, in, had.Attempt, had.Count, had.Unresolved, false)
		}
		return RequestResult{}, temporal.NewApplicationErrorWithOptions("create not sent: "+err.Error(), ErrRequestBreakerOpen,
			temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: delay, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{RequestFailure{Attempt: int(activity.GetInfo(ctx).Attempt), Message: err.Error()}}})
	}
	if beginErr != nil {
		return RequestResult{}, storeError(beginErr)
	}
	if !begun.Send {
		activity.GetLogger(ctx).Warn("not sending: the order's latest create has an answer that stands",
			"order_id", in.OrderID, "attempt_no", begun.Attempt.No, "outcome", begun.Attempt.Outcome)
		return a.report(ctx, in, begun.Attempt, begun.Count, begun.Unresolved, false)
	}

	err = sendErr
	answer := classifyCreate(err)
	answer.OrderID, answer.No, answer.TransactionKey = in.OrderID, begun.Attempt.No, created.TransactionKey
	a.observe.GatewayCall("create", observedAs[answer.Outcome], took)
	if err := a.record(ctx, answer); err != nil {
		return RequestResult{}, storeError(err)
	}
	attempt := begun.Attempt
	attempt.Outcome, attempt.TransactionKey, attempt.Reason, attempt.Detail = answer.Outcome, answer.TransactionKey, answer.Reason, answer.Detail
	keyedRetry := key != "" && answer.Reason != reasonKeyReused &&
		(answer.Outcome == store.OutcomeUnknown || (begun.Unresolved && answer.Outcome == store.OutcomeUnreachable))
	return a.report(ctx, in, attempt, begun.Count, begun.Unresolved, keyedRetry)
}

// errNotSent is a create the store did not let out: nothing for the
// request breaker to count.
var errNotSent = errors.New("create not sent")

// reasonKeyReused marks a 422: the key was used with another body. Sending
// the same body again cannot change the gateway's mind.
const reasonKeyReused = "IDEMPOTENCY_KEY_REUSED"

var observedAs = map[string]string{store.OutcomeAccepted: OutcomeOK, store.OutcomeUnreachable: OutcomeUnreachable,
	store.OutcomeUnknown: OutcomeUnknown, store.OutcomeRejected: OutcomeRejected}

// classifyCreate maps a create's result to an attempt outcome. A 4xx is the
// card's refusal, except:
//   - 409 (this key's first request is still being worked on), 422 (this key
//     came with another body) and 408: they say nothing about the card, and
//     a first request may be charging it: unknown;
//   - 429, 401 and 403: the gateway refused to process the request at all
//     (rate limit, our credentials), so it charged nothing: counted as never
//     reached, and safe to send again.
func classifyCreate(err error) store.Answer {
	var gerr *gateway.Error
	errors.As(err, &gerr)
	switch {
	case err == nil:
		return store.Answer{Outcome: store.OutcomeAccepted}
	case errors.Is(err, gateway.ErrUnreachable):
		return store.Answer{Outcome: store.OutcomeUnreachable, Detail: err.Error()}
	case !errors.Is(err, gateway.ErrRejected):
	case gerr.StatusCode == http.StatusUnprocessableEntity:
		return store.Answer{Outcome: store.OutcomeUnknown, Reason: reasonKeyReused, Detail: err.Error()}
	case gerr.StatusCode == http.StatusTooManyRequests, gerr.StatusCode == http.StatusUnauthorized, gerr.StatusCode == http.StatusForbidden:
		return store.Answer{Outcome: store.OutcomeUnreachable, Detail: "not processed: " + err.Error()}
	case gerr.StatusCode != http.StatusConflict && gerr.StatusCode != http.StatusRequestTimeout:
		return store.Answer{Outcome: store.OutcomeRejected, Reason: gerr.Code, Detail: err.Error()}
	}
	// Outcome unknown, a 409, or anything we cannot prove never left.
	return store.Answer{Outcome: store.OutcomeUnknown, Detail: err.Error()}
}

// recordWithin bounds how long an answer is retried into the database.
const recordWithin = 10 * time.Second

// record writes the answer, retrying a lost connection for a while: the
// answer is worth more than the activity's own deadline, and if it cannot be
// written at all, the retried activity finds the attempt still SENDING and
// reports the outcome unknown, which is safe. It runs on a fresh context: if
// ours was cancelled while the request was on the wire, the record matters
// all the more.
func (a *Activities) record(ctx context.Context, ans store.Answer) error {
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		err := a.store.FinishAttempt(recordCtx, ans)
		if err == nil || storeError(err) != err {
			return err // recorded, or refused for a reason a retry cannot change
		}
		activity.GetLogger(ctx).Warn("recording the gateway's answer; retrying", "order_id", ans.OrderID, "error", err)
		select {
		case <-recordCtx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// report turns an attempt's answer into the activity's result: the same
// whether the answer just came or was recorded by an earlier run. When an
// earlier create may have reached the gateway (unresolved), a refusal or an
// unreachable gateway proves nothing: the outcome is unknown. keyedRetry
// says a retry with the same idempotency key is safe and useful.
func (a *Activities) report(ctx context.Context, in RequestInput, at store.Attempt, count int, unresolved, keyedRetry bool) (RequestResult, error) {
	tries := int(activity.GetInfo(ctx).Attempt)
	failure := RequestFailure{Attempt: tries, Attempts: count, Code: at.Reason, Message: at.Detail}
	cause := errors.New(at.Detail)
	outcome := at.Outcome
	if unresolved && outcome != store.OutcomeAccepted {
		outcome = store.OutcomeUnknown
	}
	switch outcome {
	case store.OutcomeAccepted:
		return RequestResult{TransactionKey: at.TransactionKey, Attempt: tries, Attempts: count}, nil
	case store.OutcomeUnreachable:
		if in.Limit > 0 && count >= in.Limit {
			return RequestResult{}, nonRetryable(ErrGatewayUnreachable, cause, failure)
		}
		return RequestResult{}, retryable(ErrGatewayUnreachable, cause, failure)
	case store.OutcomeRejected:
		return RequestResult{}, nonRetryable(ErrGatewayRejected, cause, failure)
	}
	if keyedRetry && (in.Limit == 0 || count < in.Limit) {
		return RequestResult{}, retryable(ErrGatewayUnknownKeyed, cause, failure)
	}
	return RequestResult{}, nonRetryable(ErrGatewayOutcomeUnknown, cause, failure)
}

// LookupPayment asks the gateway what it knows, through the breaker.
func (a *Activities) LookupPayment(ctx context.Context, in LookupInput) (LookupResult, error) {
	ctx = gateway.WithUser(ctx, in.UserID)
	endpoint := "lookup"
	if in.TransactionKey == "" {
		endpoint = "lookup-by-order"
	}
	start := time.Now()
	var res LookupResult
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
	took := time.Since(start)
	var open *breaker.OpenError
	switch {
	case errors.As(err, &open):
		a.observe.GatewayCall(endpoint, OutcomeBreakerOpen, took)
		delay, _ := breaker.RetryDelay(err)
		return LookupResult{}, temporal.NewApplicationErrorWithOptions("lookup unavailable: "+err.Error(), ErrLookupUnavailable,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{Unavailable{RetryAfter: delay}}})
	case err == nil:
		a.observe.GatewayCall(endpoint, OutcomeOK, took)
		return res, nil
	case gateway.IsNotFound(err):
		// The gateway has no such transaction: a definite, empty answer.
		a.observe.GatewayCall(endpoint, OutcomeRejected, took)
		return LookupResult{Transactions: []gateway.Transaction{}}, nil
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

// CancelPayments cancels the order's transactions at the gateway. It fails
// (and is retried) until every cancel is acknowledged.
func (a *Activities) CancelPayments(ctx context.Context, in CancelInput) (CancelResult, error) {
	ctx = gateway.WithUser(ctx, in.UserID)
	keys := append([]string(nil), in.TransactionKeys...)
	if in.SearchByOrder {
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
	out := CancelResult{Transactions: []gateway.Transaction{}}
	for _, key := range keys {
		before, err := a.gateway.Payment(ctx, key)
		if err != nil && !gateway.IsNotFound(err) {
			return CancelResult{}, retryable(ErrLookupFailed, err)
		}
		start := time.Now()
		tx, err := a.gateway.Cancel(ctx, key)
		a.observe.GatewayCall("cancel", outcomeOf(err), time.Since(start))
		if gateway.IsNotFound(err) {
			continue
		}
		if err != nil {
			return CancelResult{}, retryable("CancelFailed", err)
		}
		if before.Status == gateway.StatusSuccess {
			// Seen charged just before this cancel: this cancel refunded it
			// (a retried activity sees it cancelled and does not count again).
			a.observe.ChargeRefunded()
		}
		if before.Status == gateway.StatusSuccess || tx.Reason == "REFUNDED" {
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
// is held, close the payment, order CANCELLED. An order that never made it
// into the database (cancelled while reserving) needs nothing. A payment
// already final the other way (a refusal recorded FAILED) keeps its status:
// the order is cancelled and its stock released all the same, rather than
// left holding stock over a word.
func (a *Activities) CancelOrder(ctx context.Context, in SettleInput) error {
	change := store.Change{OrderID: in.OrderID, Order: status.OrderCancelled, Payment: in.Payment, Reason: in.Reason,
		Reservation: store.ReleaseReservation, Cause: in.Cause}
	err := a.store.Advance(ctx, change)
	if errors.Is(err, store.ErrNoReservation) {
		change.Reservation = store.KeepReservation
		err = a.store.Advance(ctx, change)
	}
	var te *store.TransitionError
	if errors.As(err, &te) && te.Entity == "payment" {
		activity.GetLogger(ctx).Warn("payment status kept while cancelling", "order_id", in.OrderID, "payment", te.From, "refused", te.To)
		change.Payment, change.Cause = "", fmt.Sprintf("%s (payment kept %s)", in.Cause, te.From)
		err = a.store.Advance(ctx, change)
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
