package activities

// The create: one call to the gateway's create endpoint, under the rule the
// database holds (store.BeginAttempt) and behind the request breaker, its
// answer classified by the failure table (docs/design.md §1).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// RequestPayment sends the create, following the failure table (docs/design.md
// §1) to the letter. The store decides whether a create may go out at all
// (store.BeginAttempt); when it may not, the answer already recorded for the
// order is reported instead.
func (a *Activities) RequestPayment(ctx context.Context, in RequestInput) (RequestResult, error) {
	began := time.Now()
	key := ""
	if a.cfg.IdempotencyKeys {
		key = IdempotencyKey(in.OrderID)
	}
	// A create the client cannot build is our bug, not an outage: refuse it
	// before an attempt is recorded, so it is never counted UNREACHABLE.
	if err := a.gateway.CheckCreate(in.OrderID, in.UserID, key); err != nil {
		return RequestResult{}, nonRetryable(ErrInvalidOrder, err)
	}
	// Past the deadline or the grant, nothing is sent, and the breaker is
	// not even asked: a create it held back ends here, not at its next
	// half-open. The database checks both again before a create leaves.
	if why := lapsed(in, time.Now()); why != "" {
		return a.refusedAt(ctx, in, why, 0)
	}
	// The request breaker is asked first: a create it refuses is never
	// recorded, so it neither counts against the order's creates nor
	// touches an earlier UNKNOWN (store.BeginAttempt decides all that, and
	// only for a create that may go out now).
	var (
		begun    store.Begun
		beginErr error
		held     error
		stalled  string // why a create recorded SENDING was not sent after all
		created  gateway.Created
		sendErr  error
		took     time.Duration
	)
	req := store.AttemptRequest{OrderID: in.OrderID, IdempotencyKey: key, CallbackURL: a.cfg.CallbackURL, Grant: in.Grant,
		GrantExpires: in.GrantExpires, Limit: in.Limit}
	send := func() error {
		if held = a.cancelHeld(ctx); held != nil {
			return errNotSent
		}
		recording := time.Now()
		begun, beginErr = a.store.BeginAttempt(ctx, req)
		if beginErr != nil || !begun.Send {
			return errNotSent
		}
		// The database checked the deadline when its transaction began; a
		// record that waited (a lock, a slow disk) may commit past it. The
		// create is recorded SENDING but never sent: closed as unreachable.
		if why := lapsed(in, time.Now()); why != "" {
			beginErr = a.record(ctx, store.Answer{OrderID: in.OrderID, No: begun.Attempt.No, Outcome: store.OutcomeUnreachable,
				Detail: "not sent: recorded after its " + why + " had passed"})
			begun.Send, begun.Refused = false, why
			return errNotSent
		}
		// A create recorded SENDING and then frozen (a paused VM, a stalled
		// process) is closed UNKNOWN by the next try, and a lookup
		// Tuning.UnknownGrace after that may grant a re-send: sent now, it
		// would be a second charge beside the re-send. It leaves within
		// SendWindow of the call that recorded it, or not at all: closed as
		// unreachable, retried as one.
		if d := time.Since(recording); d > SendWindow {
			stalled = fmt.Sprintf("not sent: its sender stalled %s between recording it and sending it (the send window is %s)",
				d.Round(time.Millisecond), SendWindow)
			beginErr = a.record(ctx, store.Answer{OrderID: in.OrderID, No: begun.Attempt.No, Outcome: store.OutcomeUnreachable, Detail: stalled})
			begun.Send = false
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
		var open *breaker.OpenError
		errors.As(err, &open)
		defer a.refused("create", open, began)
		a.observe.GatewayCall("create", OutcomeBreakerOpen, 0)
		// Answered from memory, reading nothing. "Not sent now" says
		// nothing of creates sent before (a worker that died mid-create):
		// BeginAttempt reports them once the breaker lets this create
		// through, and a compensation's cancel is refused while any may
		// have reached the gateway (store.Cancel), so it searches first.
		return RequestResult{}, temporal.NewApplicationErrorWithOptions("create not sent: "+err.Error(), ErrRequestBreakerOpen,
			temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: until(delay, in.notAfter()), Category: temporal.ApplicationErrorCategoryBenign,
				Details: []any{RequestFailure{Attempt: int(activity.GetInfo(ctx).Attempt), Message: err.Error()}}})
	}
	if held != nil {
		return RequestResult{}, held
	}
	if beginErr != nil {
		return RequestResult{}, storeError(beginErr)
	}
	if begun.Refused != "" {
		return a.refusedAt(ctx, in, begun.Refused, begun.Count)
	}
	if stalled != "" {
		activity.GetLogger(ctx).Warn("create not sent: its sender stalled past the send window", "order_id", in.OrderID,
			"attempt_no", begun.Attempt.No, "detail", stalled)
		attempt := begun.Attempt
		attempt.Outcome, attempt.Detail = store.OutcomeUnreachable, stalled
		return a.report(ctx, in, attempt, begun.Count, begun.Reached, begun.Unresolved, false, false)
	}
	if !begun.Send {
		activity.GetLogger(ctx).Warn("not sending: the order's latest create has an answer that stands",
			"order_id", in.OrderID, "attempt_no", begun.Attempt.No, "outcome", begun.Attempt.Outcome)
		return a.report(ctx, in, begun.Attempt, begun.Count, begun.Reached, begun.Unresolved, false, false)
	}

	err = sendErr
	switch {
	case answeredBy(err):
		// The gateway is up: an open lookup breaker need not wait out its
		// open period to try it (breaker.Heard).
		a.lookups.Heard()
	case errors.Is(err, gateway.ErrUnreachable):
		// Nor could a lookup have reached it: counted as one (decision 019).
		a.lookups.Missed(err)
	}
	answer := classifyCreate(err)
	answer.OrderID, answer.No, answer.TransactionKey = in.OrderID, begun.Attempt.No, created.TransactionKey
	a.observe.GatewayCall("create", observedAs[answer.Outcome], took)
	err = a.record(ctx, answer)
	a.undoLate(ctx, in, answer, err)
	if err != nil {
		return RequestResult{}, storeError(err)
	}
	attempt := begun.Attempt
	attempt.Outcome, attempt.TransactionKey, attempt.Reason, attempt.Detail = answer.Outcome, answer.TransactionKey, answer.Reason, answer.Detail
	keyedRetry := key != "" && answer.Reason != reasonKeyReused &&
		(answer.Outcome == store.OutcomeUnknown || (begun.Unresolved && answer.Outcome == store.OutcomeUnreachable))
	reached := begun.Reached
	if answer.Outcome != store.OutcomeUnreachable {
		reached++ // this create may have reached the gateway too
	}
	return a.report(ctx, in, attempt, begun.Count, reached, begun.Unresolved, keyedRetry, answeredInFull(sendErr) && !begun.Unresolved)
}

// cancelHeld holds a create the server retried (a regular activity's try)
// while its workflow has an operator's cancel pending: the workflow takes
// the cancel next and stops the create between tries, so none may leave
// after it. The error is retryable, so the hold ends with that cancel; a
// failed question holds the create too. A local try runs inside the
// workflow's own task and needs no question; nor does a worker without the
// hook (Config.CancelRequested).
func (a *Activities) cancelHeld(ctx context.Context) error {
	info := activity.GetInfo(ctx)
	if a.cfg.CancelRequested == nil || info.IsLocalActivity {
		return nil
	}
	requested, err := a.cfg.CancelRequested(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	switch {
	case err != nil:
		// Logged as an error: a question that keeps failing holds every
		// retried create until its deadline, with the gateway up.
		activity.GetLogger(ctx).Error("create held: cannot ask Temporal whether the order was cancelled", "error", err)
		return retryable(ErrCancelUnknown, fmt.Errorf("create held: cannot tell whether the order was cancelled: %w", err))
	case requested:
		return temporal.NewApplicationErrorWithOptions("create held: the order's workflow has a cancel request", ErrCancelRequested,
			temporal.ApplicationErrorOptions{NextRetryDelay: cancelHold, Category: temporal.ApplicationErrorCategoryBenign})
	}
	return nil
}

// CancelRequestedBy asks the server, through c, whether a workflow run has
// a cancel request it has not taken yet (Config.CancelRequested).
func CancelRequestedBy(c client.Client) func(ctx context.Context, workflowID, runID string) (bool, error) {
	return func(ctx context.Context, workflowID, runID string) (bool, error) {
		d, err := c.DescribeWorkflow(ctx, workflowID, runID)
		if err != nil {
			return false, err
		}
		return d.RawResponse.GetWorkflowExtendedInfo().GetCancelRequested(), nil
	}
}

// SendWindow is how long a create may take from the call that records it
// SENDING to leaving for the gateway; a sender that took longer (it was
// frozen) does not send it. Tuning.UnknownGrace, the least wait before a
// lookup may grant a re-send beside it, must exceed SendWindow plus the
// connect timeout (the dial after the check) and the read timeout (how long
// a timed-out create was on the wire): the worker refuses a grace that does
// not (service.Config.Validate; docs/design.md §1, "A frozen sender").
const SendWindow = 2 * time.Second

// cancelHold is how long a create held for a pending cancel waits before
// it asks again, should the workflow not have taken the cancel by then.
const cancelHold = 5 * time.Second

// lapsed says why a create may not leave at now by the worker's clock
// (store.RefusedDeadline, store.RefusedGrant), or "".
func lapsed(in RequestInput, now time.Time) string {
	return store.Refusal(in.Deadline, in.Grant, in.GrantExpires, now)
}

// refusedAt answers a create refused at its deadline or its grant (why).
// A create whose earlier try already let one out under the same grant ("":
// the first create) — recorded, and never back with the answer: a
// timeout, a worker lost, the answer not recorded while the database was
// away; or a keyed create retried until its deadline — is not "not sent":
// that create's answer is reported, and one that may still be on the wire
// or listed late is an unknown outcome, whose lookup waits the full grace
// (at the deadline too: the last lookup waits for it).
func (a *Activities) refusedAt(ctx context.Context, in RequestInput, why string, count int) (RequestResult, error) {
	tries := int(activity.GetInfo(ctx).Attempt)
	if why == store.RefusedGrant && in.Grant == "" {
		return RequestResult{}, notSent(why, tries, count)
	}
	attempts, err := a.store.Attempts(ctx, in.OrderID)
	if err != nil {
		return RequestResult{}, storeError(err)
	}
	// The grant's latest create that may have left: one refused at the
	// dial (UNREACHABLE) lets another out under the same grant.
	i := -1
	for j, x := range slices.Backward(attempts) {
		if x.Grant == in.Grant && x.Outcome != store.OutcomeUnreachable {
			i = j
			break
		}
	}
	if i < 0 {
		return RequestResult{}, notSent(why, tries, len(attempts))
	}
	at := attempts[i]
	if at.Outcome == "" {
		at.Detail = "re-send " + in.Grant + " was sent by an earlier try that never came back with its answer"
		if in.Grant == "" {
			at.Detail = "the create was sent by an earlier try that never came back with its answer"
		}
	}
	return a.report(ctx, in, at, len(attempts), 0, false, false, false)
}

// notSent is the error of a create not sent because its deadline passed or
// its grant lapsed (why); count is the order's creates recorded, if known.
func notSent(why string, tries, count int) error {
	failure := RequestFailure{Attempt: tries, Attempts: count}
	if why == store.RefusedGrant {
		failure.Message = "re-send not sent: its grant lapsed; the order must be looked up again"
		return nonRetryable(ErrGrantExpired, errors.New(failure.Message), failure)
	}
	failure.Message = "create not sent: the order's deadline has passed"
	return nonRetryable(ErrDeadlinePassed, errors.New(failure.Message), failure)
}

// until caps a retry's delay at notAfter, so the last try comes when the
// create is refused, not after the order (or the grant) should have ended.
func until(delay time.Duration, notAfter time.Time) time.Duration {
	if notAfter.IsZero() {
		return delay
	}
	return max(min(delay, time.Until(notAfter)), time.Millisecond)
}

// answeredInFull: the gateway itself answered the create with a complete
// 5xx error body (its own error code decoded) — it finished with the
// request, so nothing of it is in flight. A 502 or 504 is a proxy's word
// about a request that may still be running behind it: not answered.
func answeredInFull(err error) bool {
	var gerr *gateway.Error
	return errors.As(err, &gerr) && gerr.StatusCode >= 500 && gerr.Err == nil && gerr.Code != "" &&
		gerr.StatusCode != http.StatusBadGateway && gerr.StatusCode != http.StatusGatewayTimeout
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

// undoLate: the create was overtaken — its sender stalled past the workflow
// task, and meanwhile the order ended (a settle; a compensation, which also
// closed the attempt UNKNOWN) or another create closed the attempt. Its
// answer was refused (store.FinishAttempt: for the attempt, or for the
// order; an answer recorded on an open order is the workflow's, and one that
// lands after the compensation's search makes its CancelOrder search again:
// store.CancelCheck). If the order has ended without this create's
// transaction, a charge it made is money taken for nothing, which no
// workflow will see: its sender cancels it at the gateway now. An order
// still open is left to its workflow, which looks the order up. A cancel
// that fails is logged; the late callback and the sweep remain.
func (a *Activities) undoLate(ctx context.Context, in RequestInput, ans store.Answer, recordErr error) {
	var te *store.TransitionError
	overtaken := errors.As(recordErr, &te) && (te.Entity == "attempt" || te.Entity == "order")
	maybeCharged := ans.Outcome == store.OutcomeAccepted || ans.Outcome == store.OutcomeUnknown
	if !overtaken || !maybeCharged {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	log := activity.GetLogger(ctx)
	order, err := a.store.GetOrder(ctx, in.OrderID)
	if err != nil || !order.Status.Final() {
		return
	}
	undo := CancelInput{OrderID: in.OrderID, UserID: in.UserID}
	switch {
	case ans.TransactionKey != "" && !(order.Status == status.OrderConfirmed && order.TransactionKey == ans.TransactionKey):
		undo.TransactionKeys = []string{ans.TransactionKey}
	case ans.TransactionKey == "" && order.Status != status.OrderConfirmed:
		undo.SearchByOrder = true // the outcome is unknown: whatever the gateway holds goes
	default:
		return
	}
	log.Warn("create answered after the order ended; cancelling it at the gateway", "order_id", in.OrderID,
		"attempt_no", ans.No, "outcome", ans.Outcome, "transaction_key", ans.TransactionKey, "order", order.Status)
	res, err := a.CancelPayments(ctx, undo)
	detail := map[string]any{"attempt_no": ans.No, "transaction_key": ans.TransactionKey, "order_status": string(order.Status)}
	if err != nil {
		log.Error("cancel of a late create failed; the late callback or the sweep must refund it", "order_id", in.OrderID, "error", err)
		detail["error"] = err.Error()
	} else {
		detail["refunded"] = res.Refunded
	}
	_ = a.store.RecordEvent(ctx, store.Event{OrderID: in.OrderID, Kind: store.KindAnomaly,
		Cause: "create answered after the order was " + string(order.Status) + "; cancelled at the gateway by its sender", Detail: detail})
	if err == nil && res.Refunded > 0 && order.Status != status.OrderConfirmed {
		_ = a.store.Advance(ctx, store.Change{OrderID: in.OrderID, Payment: status.PaymentRefunded,
			Cause: "late create refunded by its sender"})
	}
}

// report turns an attempt's answer into the activity's result: the same
// whether the answer just came or was recorded by an earlier run. When an
// earlier create may have reached the gateway (unresolved), a refusal or an
// unreachable gateway proves nothing: the outcome is unknown. keyedRetry
// says a retry with the same idempotency key is safe and useful; answered,
// that the gateway answered this create in full (RequestFailure.Answered).
// count is the order's creates recorded, the limit's measure; reached, those
// of them that may have reached the gateway, the keyed retry's pace.
func (a *Activities) report(ctx context.Context, in RequestInput, at store.Attempt, count, reached int, unresolved, keyedRetry, answered bool) (RequestResult, error) {
	tries := int(activity.GetInfo(ctx).Attempt)
	failure := RequestFailure{Attempt: tries, Attempts: count, Code: at.Reason, Message: at.Detail, Answered: answered}
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
		return RequestResult{}, paced(ErrGatewayUnreachable, cause, until(createBackoff(tries), in.notAfter()), failure)
	case store.OutcomeRejected:
		return RequestResult{}, nonRetryable(ErrGatewayRejected, cause, failure)
	}
	if keyedRetry && (in.Limit == 0 || count < in.Limit) {
		// Paced by the creates that may have reached the gateway, not by
		// Temporal's tries nor by every create recorded: those a breaker
		// refused, or a dial refused (UNREACHABLE), through an outage would
		// start the first retry after it at the schedule's 10 s cap.
		return RequestResult{}, paced(ErrGatewayUnknownKeyed, cause, until(createBackoff(max(reached, 1)), in.notAfter()), failure)
	}
	return RequestResult{}, nonRetryable(ErrGatewayOutcomeUnknown, cause, failure)
}
