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
	return s.inTx(ctx, func(tx *tx) error { return appendEvent(tx, e) })
}

// tx is one of the store's transactions: the pgx transaction and the
// event-log lines its steps have appended so far. A step's lines are
// written by flush, in one statement just before the commit, not one
// round trip each: nothing reads the log inside a transaction, and the
// lines land or vanish with the transaction's other writes as before.
// Only inTx makes one: a tx it did not make would never be flushed, and its
// lines would be lost without an error.
type tx struct {
	pgx.Tx
	events []eventLine
}

// eventLine is an Event as flush writes it.
type eventLine struct{ orderID, kind, from, to, cause, detail string }

// appendEvent adds a line to tx's event log, in order.
func appendEvent(tx *tx, e Event) error {
	detail := e.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode event detail: %w", err)
	}
	tx.events = append(tx.events, eventLine{e.OrderID, e.Kind, e.From, e.To, e.Cause, string(raw)})
	return nil
}

// flush writes tx's event lines in the order they were appended (their
// event_ids rise in that order) and empties the queue.
func (tx *tx) flush(ctx context.Context) error {
	if len(tx.events) == 0 {
		return nil
	}
	var cols [6][]string
	for _, l := range tx.events {
		for i, v := range [6]string{l.orderID, l.kind, l.from, l.to, l.cause, l.detail} {
			cols[i] = append(cols[i], v)
		}
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO payment_events (order_id, kind, from_status, to_status, cause, detail)
		SELECT order_id, kind, from_status, to_status, cause, detail::jsonb
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
		     AS e(order_id, kind, from_status, to_status, cause, detail, n)
		ORDER BY n`, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	tx.events = tx.events[:0]
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
