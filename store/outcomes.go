package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/status"
)

// CauseOperatorCancel is the cause an operator's cancel records on the
// order's move to CANCELLED (a compensation may add to it, after a space).
// It is how Outcomes tells an operator's cancel from an order lost.
const CauseOperatorCancel = "cancelled by an operator"

// CauseCustomerRefund is the cause a refund a client asked for records on
// the payment's move to REFUNDED: a sale undone on purpose, not lost.
const CauseCustomerRefund = "refunded at the customer's request"

// Kinds of lost order (Outcome.Lost). A lost order is a sale the customer
// wanted and did not get: it ended CANCELLED without an operator's cancel,
// or its charge was refunded (payment REFUNDED) without one, nor at the
// customer's request.
const (
	LostCancelled = "cancelled" // CANCELLED, nothing kept charged
	LostRefunded  = "refunded"  // charged, then refunded
)

// LostKinds are the kinds of lost order, in the order reports list them.
var LostKinds = []string{LostCancelled, LostRefunded}

// Outcome is how one order ended, as the database holds it.
type Outcome struct {
	OrderID string         `json:"orderId"`
	Status  status.Order   `json:"status"`
	Payment status.Payment `json:"paymentStatus,omitempty"`
	// OperatorCancel: an operator's cancel moved it to CANCELLED.
	OperatorCancel bool `json:"operatorCancel,omitempty"`
	// Lost is "" or one of LostKinds.
	Lost string `json:"lost,omitempty"`
	// PlacedAt is when the order was recorded (its Reserve); FinalAt when
	// its status became final, zero while it is not.
	PlacedAt time.Time `json:"placedAt"`
	FinalAt  time.Time `json:"finalAt,omitzero"`
	// Deadline is the order's, zero when it named none.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Final reports whether the order had reached a final status.
func (o Outcome) Final() bool { return !o.FinalAt.IsZero() }

// ToFinal is placed to final status; 0 while the order is not final.
func (o Outcome) ToFinal() time.Duration {
	if !o.Final() {
		return 0
	}
	return o.FinalAt.Sub(o.PlacedAt)
}

// Outcomes reads how the given orders ended, sorted by order id; ids the
// database does not hold are left out. The one definition of a lost order
// is this query's.
func (s *Store) Outcomes(ctx context.Context, orderIDs []string) ([]Outcome, error) {
	return outcomes(ctx, s.pool, orderIDs)
}

// rowsQuerier is a pool or a transaction.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// outcomes is Outcomes on q: the pool, or a transaction that has just
// ended an order (inTx reads it there, before the commit, so that the
// metrics count lost orders by this one definition).
func outcomes(ctx context.Context, q rowsQuerier, orderIDs []string) ([]Outcome, error) {
	rows, err := q.Query(ctx, `
		SELECT o.order_id, o.status, COALESCE(p.status, ''), op.cancelled,
		       CASE WHEN op.cancelled THEN ''
		            WHEN p.status = 'REFUNDED' AND NOT cr.refunded THEN $3
		            WHEN p.status = 'REFUNDED' THEN ''
		            WHEN o.status = 'CANCELLED' THEN $4
		            ELSE '' END,
		       o.created_at, f.at, o.deadline
		FROM orders o
		LEFT JOIN payments p ON p.order_id = o.order_id
		CROSS JOIN LATERAL (SELECT EXISTS (
		    SELECT 1 FROM payment_events e
		    WHERE e.order_id = o.order_id AND e.kind = 'ORDER' AND e.to_status = 'CANCELLED'
		      AND starts_with(e.cause, $2)) AS cancelled) op
		CROSS JOIN LATERAL (SELECT EXISTS (
		    SELECT 1 FROM payment_events e
		    WHERE e.order_id = o.order_id AND e.kind = 'PAYMENT' AND e.to_status = 'REFUNDED'
		      AND starts_with(e.cause, $5)) AS refunded) cr
		LEFT JOIN LATERAL (
		    SELECT e.at FROM payment_events e
		    WHERE e.order_id = o.order_id AND e.kind = 'ORDER' AND e.to_status = o.status
		      AND o.status IN ('CONFIRMED', 'FAILED', 'CANCELLED', 'REJECTED')
		    ORDER BY e.event_id LIMIT 1) f ON true
		WHERE o.order_id = ANY($1)
		ORDER BY o.order_id`, orderIDs, CauseOperatorCancel, LostRefunded, LostCancelled, CauseCustomerRefund)
	if err != nil {
		return nil, fmt.Errorf("read outcomes: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Outcome, error) {
		var o Outcome
		var final, deadline *time.Time
		err := row.Scan(&o.OrderID, &o.Status, &o.Payment, &o.OperatorCancel, &o.Lost, &o.PlacedAt, &final, &deadline)
		if final != nil {
			o.FinalAt = *final
		}
		if deadline != nil {
			o.Deadline = *deadline
		}
		return o, err
	})
}
