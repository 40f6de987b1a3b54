package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The payment event log: append-only, one line per status change (written
// by Advance in the same transaction) or per note (RecordEvent).

// Event kinds in the payment event log.
const (
	KindOrder       = "ORDER"
	KindPayment     = "PAYMENT"
	KindReservation = "RESERVATION"
	KindAttempt     = "ATTEMPT"
	KindAnomaly     = "ANOMALY"
	KindCallback    = "CALLBACK"
)

// Event is one line of the append-only payment event log.
type Event struct {
	ID      int64          `json:"id"`
	OrderID string         `json:"orderId"`
	Kind    string         `json:"kind"`
	From    string         `json:"from,omitempty"`
	To      string         `json:"to,omitempty"`
	Cause   string         `json:"cause"`
	Detail  map[string]any `json:"detail,omitempty"`
	At      time.Time      `json:"at"`
}

// RecordEvent appends an event that is not a status change: an anomaly (a
// contradicting answer, a late callback) or a callback received.
func (s *Store) RecordEvent(ctx context.Context, e Event) error {
	if e.OrderID == "" || e.Kind == "" || e.Cause == "" {
		return fmt.Errorf("%w: an event needs an order id, a kind and a cause", ErrInvalid)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error { return appendEvent(ctx, tx, e) })
}

func appendEvent(ctx context.Context, tx pgx.Tx, e Event) error {
	detail := e.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode event detail: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO payment_events (order_id, kind, from_status, to_status, cause, detail) VALUES ($1, $2, $3, $4, $5, $6)`,
		e.OrderID, e.Kind, e.From, e.To, e.Cause, raw); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

// Events returns an order's event log, oldest first.
func (s *Store) Events(ctx context.Context, orderID string) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT event_id, order_id, kind, from_status, to_status, cause, detail, at
		FROM payment_events WHERE order_id = $1 ORDER BY event_id`, orderID)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.ID, &e.OrderID, &e.Kind, &e.From, &e.To, &e.Cause, &e.Detail, &e.At)
		return e, err
	})
}
