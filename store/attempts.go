package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/status"
)

// Attempt outcomes, the rows of the failure table (docs/design.md §1).
const (
	OutcomeAccepted    = "ACCEPTED"
	OutcomeUnreachable = "UNREACHABLE"
	OutcomeUnknown     = "UNKNOWN"
	OutcomeRejected    = "REJECTED"
)

// Attempt is one create sent (or about to be sent) to the gateway.
type Attempt struct {
	OrderID        string     `json:"orderId"`
	No             int        `json:"no"`
	State          string     `json:"state"`
	Outcome        string     `json:"outcome,omitempty"`
	TransactionKey string     `json:"transactionKey,omitempty"`
	IdempotencyKey string     `json:"idempotencyKey,omitempty"`
	Grant          string     `json:"grant,omitempty"`
	CallbackURL    string     `json:"callbackUrl,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	Detail         string     `json:"detail,omitempty"`
	SentAt         time.Time  `json:"sentAt"`
	AnsweredAt     *time.Time `json:"answeredAt,omitempty"`
}

// MaybeSent: the create may have reached the gateway — sent and unanswered,
// accepted, or of unknown outcome (not refused at the dial, not rejected).
func (a Attempt) MaybeSent() bool {
	return a.State == "SENDING" || a.Outcome == OutcomeAccepted || a.Outcome == OutcomeUnknown
}

// AttemptRequest asks for the right to send one create of an order.
type AttemptRequest struct {
	OrderID        string
	IdempotencyKey string // "" unless the gateway honours keys
	CallbackURL    string // used unless an earlier create of the order fixed one
	// Grant is the workflow's authorisation to send past an UNKNOWN attempt,
	// given once the gateway knew no transaction of the order after the grace
	// period. Each grant lets one create reach the gateway; "" is none.
	Grant string
	// Limit bounds the order's creates; 0 is no bound.
	Limit int
	// GrantExpires is when Grant lapses, by the database's clock: the grant
	// stands on a lookup, and proves nothing once that lookup is old.
	GrantExpires time.Time
}

// Why BeginAttempt refused a create that the order's attempts would allow
// (Begun.Refused).
const (
	RefusedDeadline = "deadline" // the order's deadline has passed: no create leaves after it
	RefusedGrant    = "grant"    // the re-send's grant has lapsed: look the order up again
)

// Begun is BeginAttempt's answer. When Send is true, Attempt is a new
// attempt, recorded SENDING, to be sent now. Otherwise sending could charge
// twice, or the limit is reached: Attempt is the order's latest attempt with
// the answer recorded for it, which the caller reports instead of sending.
type Begun struct {
	Attempt Attempt
	Send    bool
	// Count is the order's creates recorded so far, a new one included.
	Count int
	// Reached is how many of the order's earlier creates (the new one not
	// included) may have reached the gateway: all but those recorded
	// UNREACHABLE, which it never saw (a refused dial, a create not sent, a
	// request it would not process). Keyed retries are paced by it.
	Reached int
	// CallbackURL is the one to send: the order's first create's, so every
	// create of one order has the same body.
	CallbackURL string
	// Unresolved: an earlier create of the order may have reached the
	// gateway and nothing has cleared it. Whatever this create's answer,
	// the order's outcome is then unknown until the gateway is asked.
	Unresolved bool
	// Refused says why a create the attempts would allow was not sent
	// (RefusedDeadline, RefusedGrant); "" otherwise. Attempt is then the
	// latest, if any.
	Refused string
}

// unresolved lists the UNKNOWN attempts among attempts that no later
// granted attempt cleared. A grant is given only after the gateway knew no
// transaction of the order by order id, which clears every create before it.
func unresolved(attempts []Attempt) []Attempt {
	var open []Attempt
	for _, a := range attempts {
		if a.Grant != "" {
			open = open[:0]
		}
		if a.Outcome == OutcomeUnknown {
			open = append(open, a)
		}
	}
	return open
}

// mayResend is the rule for sending a create (docs/design.md §1). An ACCEPTED
// or REJECTED answer stands for the order. Otherwise a create is sent only
// when no earlier one may have reached the gateway — every one was
// UNREACHABLE, or cleared by a grant — or when each that may have carries
// the same idempotency key the gateway honours, or when the workflow
// authorised a re-send with a grant not used before.
func mayResend(attempts []Attempt, req AttemptRequest) bool {
	if len(attempts) == 0 {
		return true
	}
	if req.Limit > 0 && len(attempts) >= req.Limit {
		return false
	}
	switch attempts[len(attempts)-1].Outcome {
	case OutcomeAccepted, OutcomeRejected:
		return false
	}
	open := unresolved(attempts)
	if len(open) == 0 {
		return true
	}
	sameKey := req.IdempotencyKey != "" && !slices.ContainsFunc(open, func(a Attempt) bool { return a.IdempotencyKey != req.IdempotencyKey })
	if sameKey {
		return true // the gateway answers a repeat of this key from its store
	}
	return req.Grant != "" && !slices.ContainsFunc(attempts, func(a Attempt) bool { return a.Grant == req.Grant })
}

// BeginAttempt decides, under the order's row lock, whether a create may be
// sent, and records it SENDING before it is sent.
//
// An earlier attempt still SENDING had its sender die with the request
// possibly on the wire: it is closed as UNKNOWN (payment UNKNOWN, order
// PENDING) in the same transaction, and mayResend then decides.
func (s *Store) BeginAttempt(ctx context.Context, req AttemptRequest) (Begun, error) {
	var b Begun
	err := s.inTx(ctx, func(tx *tx) error {
		orderStatus, err := lockOrder(ctx, tx, req.OrderID)
		if err != nil {
			return err
		}
		if orderStatus.Final() {
			return &TransitionError{Entity: "order", OrderID: req.OrderID, From: string(orderStatus), To: "a new payment attempt"}
		}
		var deadline *time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT deadline, now() FROM orders WHERE order_id = $1`, req.OrderID).Scan(&deadline, &now); err != nil {
			return fmt.Errorf("read deadline: %w", err)
		}
		if err := closeLost(ctx, tx, req.OrderID, "the sender stopped before recording the answer"); err != nil {
			return err
		}
		attempts, err := attemptsOf(ctx, tx, req.OrderID)
		if err != nil {
			return err
		}
		if b = decide(attempts, req); !b.Send {
			return nil
		}
		if b.Refused = refusal(deadline, now, req); b.Refused != "" {
			b.Send = false
			if len(attempts) > 0 {
				b.Attempt = attempts[len(attempts)-1]
			}
			return nil
		}
		a := Attempt{OrderID: req.OrderID, State: "SENDING", IdempotencyKey: req.IdempotencyKey, Grant: req.Grant,
			CallbackURL: b.CallbackURL}
		if err := tx.QueryRow(ctx, `
			INSERT INTO payment_attempts (order_id, attempt_no, state, idempotency_key, resend_grant, callback_url)
			SELECT $1, COALESCE(max(attempt_no), 0) + 1, 'SENDING', NULLIF($2, ''), NULLIF($3, ''), $4
			FROM payment_attempts WHERE order_id = $1
			RETURNING attempt_no, sent_at`, req.OrderID, req.IdempotencyKey, req.Grant, b.CallbackURL).Scan(&a.No, &a.SentAt); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		b.Attempt, b.Count = a, b.Count+1
		cause := fmt.Sprintf("create #%d sent", a.No)
		if err := movePayment(ctx, tx, Change{OrderID: req.OrderID, Payment: status.PaymentRequested, Cause: cause}); err != nil {
			return err
		}
		return appendEvent(tx, Event{OrderID: req.OrderID, Kind: KindAttempt, To: "SENDING", Cause: cause,
			Detail: map[string]any{"grant": req.Grant}})
	})
	return b, err
}

// decide is BeginAttempt's answer for the order's attempts, before it
// records the new one when Send.
func decide(attempts []Attempt, req AttemptRequest) Begun {
	b := Begun{Count: len(attempts), CallbackURL: req.CallbackURL}
	for _, a := range attempts {
		if a.Outcome != OutcomeUnreachable {
			b.Reached++
		}
	}
	// A granted create starts clean: the grant cleared what came before.
	b.Unresolved = req.Grant == "" && len(unresolved(attempts)) > 0
	if i := slices.IndexFunc(attempts, func(a Attempt) bool { return a.CallbackURL != "" }); i >= 0 {
		b.CallbackURL = attempts[i].CallbackURL
	}
	if b.Send = mayResend(attempts, req); !b.Send {
		b.Attempt = attempts[len(attempts)-1]
	}
	return b
}

// refusal is why a create the attempts allow may not leave now, or "".
func refusal(deadline *time.Time, now time.Time, req AttemptRequest) string {
	var d time.Time
	if deadline != nil {
		d = *deadline
	}
	return Refusal(d, req.Grant, req.GrantExpires, now)
}

// Refusal is why a create may not leave at now: its order's deadline (zero:
// none) has passed, or its grant ("" : none) has lapsed; "" when it may.
// BeginAttempt asks it by the database's clock, the create activity by the
// worker's.
func Refusal(deadline time.Time, grant string, grantExpires, now time.Time) string {
	switch {
	case !deadline.IsZero() && !now.Before(deadline):
		return RefusedDeadline
	case grant != "" && !grantExpires.IsZero() && !now.Before(grantExpires):
		return RefusedGrant
	}
	return ""
}

// closeLost closes an attempt left SENDING as UNKNOWN (closeSending), with
// the payment and order moves that answer means.
func closeLost(ctx context.Context, tx *tx, orderID, why string) error {
	lost, err := closeSending(ctx, tx, orderID, why)
	if err != nil || lost == 0 {
		return err
	}
	return advance(ctx, tx, answerChange(Answer{OrderID: orderID, No: lost, Outcome: OutcomeUnknown, Detail: why}, false))
}

// closeSending closes an attempt left SENDING as UNKNOWN, with an anomaly
// event; why says what ended the wait for its answer. It returns the
// attempt's number, 0 when none was SENDING. The row is committed, not
// rolled back: it is the record that the gateway must now be asked what it
// knows, and that a late answer to it is refused.
func closeSending(ctx context.Context, tx *tx, orderID, why string) (int, error) {
	var lost int
	err := tx.QueryRow(ctx, `
		UPDATE payment_attempts SET state = 'ANSWERED', outcome = 'UNKNOWN', answered_at = clock_timestamp(),
		       detail = 'sent and never answered: ' || $2
		WHERE order_id = $1 AND state = 'SENDING' RETURNING attempt_no`, orderID, why).Scan(&lost)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("close attempt in flight: %w", err)
	}
	return lost, appendEvent(tx, Event{OrderID: orderID, Kind: KindAnomaly, Cause: "create sent and never answered",
		Detail: map[string]any{"attempt_no": lost, "why": why}})
}

// Answer is the gateway's answer to one attempt.
type Answer struct {
	OrderID        string
	No             int
	Outcome        string
	TransactionKey string // ACCEPTED
	Reason         string // the gateway's code, REJECTED
	Detail         string // the error, in words
}

// answerChange is what an answer means for the order: the status moves that
// FinishAttempt records together with it. After an earlier create that may
// have reached the gateway (earlierUnknown), a refusal or an unreachable
// gateway proves nothing about the order: its payment is UNKNOWN.
func answerChange(a Answer, earlierUnknown bool) Change {
	c := Change{OrderID: a.OrderID}
	if earlierUnknown && (a.Outcome == OutcomeRejected || a.Outcome == OutcomeUnreachable) {
		c.Order, c.Payment = status.OrderPending, status.PaymentUnknown
		c.Cause = fmt.Sprintf("create #%d answered %s after an earlier create with an unknown outcome", a.No, a.Outcome)
		return c
	}
	switch a.Outcome {
	case OutcomeAccepted:
		c.Order, c.Payment, c.TransactionKey = status.OrderPending, status.PaymentPending, a.TransactionKey
		c.Cause = fmt.Sprintf("gateway accepted create #%d", a.No)
	case OutcomeUnknown:
		c.Order, c.Payment = status.OrderPending, status.PaymentUnknown
		c.Cause = fmt.Sprintf("create #%d outcome unknown: %s", a.No, a.Detail)
	case OutcomeRejected:
		c.Payment, c.Reason = status.PaymentFailed, a.Reason
		c.Cause = "gateway rejected the create: " + a.Reason
	}
	return c
}

// FinishAttempt records the gateway's answer to an attempt and what it means
// for the order's statuses, in one transaction: a crash can never leave the
// answer recorded and the order not moved. Recording the same answer again
// is a no-op; another answer for an attempt already closed is refused. An
// answer that comes after the order ended (its sender was overtaken) is
// recorded on the attempt, which is then no longer SENDING, but moves no
// status: a *TransitionError for the order says so, and the sender undoes a
// charge the order does not keep (activities.RequestPayment).
func (s *Store) FinishAttempt(ctx context.Context, a Answer) error {
	var ended *TransitionError
	err := s.inTx(ctx, func(tx *tx) error {
		// The order's row lock comes first, as in BeginAttempt (order, then
		// its attempts): the other way round, a retried create's BeginAttempt
		// and this would deadlock. The attempt row is locked only when the
		// join yields it, after the order's lock; when no attempt is left
		// SENDING (a repeated or late answer) the statement locks nothing and
		// the branch below only reads a row that never changes again.
		var orderStatus status.Order
		err := tx.QueryRow(ctx, `
			WITH o AS (SELECT order_id, status FROM orders WHERE order_id = $1 FOR UPDATE)
			UPDATE payment_attempts a SET state = 'ANSWERED', outcome = $3, transaction_key = NULLIF($4, ''),
			       reason = $5, detail = $6, answered_at = clock_timestamp()
			FROM o WHERE a.order_id = o.order_id AND a.attempt_no = $2 AND a.state = 'SENDING'
			RETURNING o.status`,
			a.OrderID, a.No, a.Outcome, a.TransactionKey, a.Reason, a.Detail).Scan(&orderStatus)
		if pgCode(err) == codeCheckViolation {
			return fmt.Errorf("%w: outcome %q", ErrInvalid, a.Outcome)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			var current string
			err := tx.QueryRow(ctx, `
				SELECT COALESCE(a.outcome, ''), o.status FROM payment_attempts a JOIN orders o ON o.order_id = a.order_id
				WHERE a.order_id = $1 AND a.attempt_no = $2`, a.OrderID, a.No).Scan(&current, &orderStatus)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: attempt %d of order %s", ErrNotFound, a.No, a.OrderID)
			}
			if err != nil {
				return err
			}
			if current != a.Outcome {
				return &TransitionError{Entity: "attempt", OrderID: a.OrderID, From: current, To: a.Outcome}
			}
			if orderStatus.Final() {
				// A repeat (the first's commit went through unseen) of an
				// answer that came after the order ended: refused for the
				// order again, so that its sender still undoes it.
				ended = answeredAfterEnd(a, orderStatus)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		if err := appendEvent(tx, Event{OrderID: a.OrderID, Kind: KindAttempt, From: "SENDING", To: a.Outcome,
			Cause: fmt.Sprintf("create #%d answered", a.No), Detail: map[string]any{"transaction_key": a.TransactionKey, "detail": a.Detail}}); err != nil {
			return err
		}
		if orderStatus.Final() {
			ended = answeredAfterEnd(a, orderStatus)
			return appendEvent(tx, Event{OrderID: a.OrderID, Kind: KindAnomaly, Cause: "create answered after the order was " + string(orderStatus),
				Detail: map[string]any{"attempt_no": a.No, "outcome": a.Outcome, "transaction_key": a.TransactionKey}})
		}
		attempts, err := attemptsOf(ctx, tx, a.OrderID)
		if err != nil {
			return err
		}
		clean := granted(attempts, a.No)
		earlier := slices.DeleteFunc(attempts, func(x Attempt) bool { return x.No >= a.No })
		// A grant clears the creates before it for sending, but a refusal
		// of the re-send does not fail the order: the lookup behind the
		// grant may have come before the gateway listed an earlier create's
		// transaction, which the workflow searches for first (decide).
		refusedAfterUnknown := a.Outcome == OutcomeRejected &&
			slices.ContainsFunc(earlier, func(x Attempt) bool { return x.Outcome == OutcomeUnknown })
		if c := answerChange(a, refusedAfterUnknown || (!clean && len(unresolved(earlier)) > 0)); c.Cause != "" {
			return advance(ctx, tx, c)
		}
		return nil
	})
	if err == nil && ended != nil {
		return ended
	}
	return err
}

// answeredAfterEnd is FinishAttempt's refusal, for the order, of an answer
// that came after the order ended.
func answeredAfterEnd(a Answer, ended status.Order) *TransitionError {
	return &TransitionError{Entity: "order", OrderID: a.OrderID, From: string(ended),
		To: fmt.Sprintf("the answer of create #%d (%s)", a.No, a.Outcome)}
}

// lockOrder takes the order's row lock, which every step of one order's
// life queues on, and reads its status.
func lockOrder(ctx context.Context, tx *tx, orderID string) (status.Order, error) {
	var st status.Order
	err := tx.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1 FOR UPDATE`, orderID).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: order %s", ErrNotFound, orderID)
	}
	if err != nil {
		return "", fmt.Errorf("lock order: %w", err)
	}
	return st, nil
}

// granted reports whether attempt no carries a grant.
func granted(attempts []Attempt, no int) bool {
	i := slices.IndexFunc(attempts, func(x Attempt) bool { return x.No == no })
	return i >= 0 && attempts[i].Grant != ""
}

// Attempts lists an order's create attempts in order.
func (s *Store) Attempts(ctx context.Context, orderID string) ([]Attempt, error) {
	return attemptsOf(ctx, s.pool, orderID)
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func attemptsOf(ctx context.Context, q queryer, orderID string) ([]Attempt, error) {
	rows, err := q.Query(ctx, `
		SELECT order_id, attempt_no, state, COALESCE(outcome, ''), COALESCE(transaction_key, ''),
		       COALESCE(idempotency_key, ''), COALESCE(resend_grant, ''), callback_url, reason, detail, sent_at, answered_at
		FROM payment_attempts WHERE order_id = $1 ORDER BY attempt_no`, orderID)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := row.Scan(&a.OrderID, &a.No, &a.State, &a.Outcome, &a.TransactionKey, &a.IdempotencyKey, &a.Grant,
			&a.CallbackURL, &a.Reason, &a.Detail, &a.SentAt, &a.AnsweredAt)
		return a, err
	})
}
