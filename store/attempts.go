package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/status"
)

// Attempt outcomes, the rows of SPEC §1's table.
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
	Detail         string     `json:"detail,omitempty"`
	SentAt         time.Time  `json:"sentAt"`
	AnsweredAt     *time.Time `json:"answeredAt,omitempty"`
}

// BeginAttempt records that a create is about to be sent, before it is sent.
//
// If an earlier create of this order is still marked sent-and-unanswered,
// its sender died with the request possibly on the wire. That attempt is
// closed as UNKNOWN and ErrAttemptInFlight is returned: the caller must not
// send (unless the gateway honours its idempotency key) and must find the
// transaction by order id instead.
func (s *Store) BeginAttempt(ctx context.Context, orderID, idempotencyKey string) (Attempt, error) {
	var a Attempt
	var inFlight bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The order row lock serialises attempts of one order.
		var orderStatus status.Order
		err := tx.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1 FOR UPDATE`, orderID).Scan(&orderStatus)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: order %s", ErrNotFound, orderID)
		}
		if err != nil {
			return err
		}
		if orderStatus.Final() {
			return &TransitionError{Entity: "order", OrderID: orderID, From: string(orderStatus), To: "a new payment attempt"}
		}
		var lost int
		err = tx.QueryRow(ctx, `
			UPDATE payment_attempts SET state = 'ANSWERED', outcome = 'UNKNOWN', answered_at = clock_timestamp(),
			       detail = 'sent and never answered: the sender stopped before recording the answer'
			WHERE order_id = $1 AND state = 'SENDING' RETURNING attempt_no`, orderID).Scan(&lost)
		if err == nil {
			a = Attempt{OrderID: orderID, No: lost, State: "ANSWERED", Outcome: OutcomeUnknown}
			if err := appendEvent(ctx, tx, Event{OrderID: orderID, Kind: KindAnomaly, Cause: "create sent and never answered",
				Detail: map[string]any{"attempt_no": lost}}); err != nil {
				return err
			}
			// Committed, not rolled back: the closed attempt is the record that
			// the gateway must now be asked what it knows.
			inFlight = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("check attempts in flight: %w", err)
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO payment_attempts (order_id, attempt_no, state, idempotency_key)
			SELECT $1, COALESCE(max(attempt_no), 0) + 1, 'SENDING', NULLIF($2, '') FROM payment_attempts WHERE order_id = $1
			RETURNING attempt_no, sent_at`, orderID, idempotencyKey).Scan(&a.No, &a.SentAt)
		if pgCode(err) == codeUniqueViolation {
			return ErrAttemptInFlight
		}
		if err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		a.OrderID, a.State, a.IdempotencyKey = orderID, "SENDING", idempotencyKey
		if err := movePayment(ctx, tx, Change{OrderID: orderID, Payment: status.PaymentRequested,
			Cause: fmt.Sprintf("create #%d sent", a.No)}); err != nil {
			return err
		}
		return appendEvent(ctx, tx, Event{OrderID: orderID, Kind: KindAttempt, To: "SENDING",
			Cause: fmt.Sprintf("create #%d sent", a.No)})
	})
	if inFlight || errors.Is(err, ErrAttemptInFlight) {
		return a, fmt.Errorf("%w: order %s attempt %d", ErrAttemptInFlight, orderID, a.No)
	}
	return a, err
}

// FinishAttempt records the gateway's answer to an attempt. Recording the
// same answer again is a no-op.
func (s *Store) FinishAttempt(ctx context.Context, orderID string, no int, outcome, transactionKey, detail string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE payment_attempts SET state = 'ANSWERED', outcome = $3, transaction_key = NULLIF($4, ''),
			       detail = $5, answered_at = clock_timestamp()
			WHERE order_id = $1 AND attempt_no = $2 AND state = 'SENDING'`, orderID, no, outcome, transactionKey, detail)
		if pgCode(err) == codeCheckViolation {
			return fmt.Errorf("%w: outcome %q", ErrInvalid, outcome)
		}
		if err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var current string
			err := tx.QueryRow(ctx, `SELECT COALESCE(outcome, '') FROM payment_attempts WHERE order_id = $1 AND attempt_no = $2`,
				orderID, no).Scan(&current)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: attempt %d of order %s", ErrNotFound, no, orderID)
			}
			if err != nil {
				return err
			}
			if current == outcome {
				return nil
			}
			return &TransitionError{Entity: "attempt", OrderID: orderID, From: current, To: outcome}
		}
		return appendEvent(ctx, tx, Event{OrderID: orderID, Kind: KindAttempt, From: "SENDING", To: outcome,
			Cause: fmt.Sprintf("create #%d answered", no), Detail: map[string]any{"transaction_key": transactionKey, "detail": detail}})
	})
}

// Attempts lists an order's create attempts in order.
func (s *Store) Attempts(ctx context.Context, orderID string) ([]Attempt, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT order_id, attempt_no, state, COALESCE(outcome, ''), COALESCE(transaction_key, ''),
		       COALESCE(idempotency_key, ''), detail, sent_at, answered_at
		FROM payment_attempts WHERE order_id = $1 ORDER BY attempt_no`, orderID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := row.Scan(&a.OrderID, &a.No, &a.State, &a.Outcome, &a.TransactionKey, &a.IdempotencyKey, &a.Detail, &a.SentAt, &a.AnsweredAt)
		return a, err
	})
}
