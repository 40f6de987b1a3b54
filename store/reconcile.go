package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/status"
)

// What the reconciliation sweep reads (docs/design.md §10): pages of orders
// to compare with the gateway and Temporal, and whether a finding was
// already flagged.

// Cursor is where a page of candidates starts: after this order, in
// (updated_at, order_id) order. The zero Cursor is the beginning.
type Cursor struct {
	UpdatedAt time.Time `json:"updatedAt"`
	OrderID   string    `json:"orderId"`
}

// Candidate is an order the sweep looks at, with its reservation and payment.
type Candidate struct {
	Order
	Cursor Cursor `json:"cursor"`
}

// ReconcileCandidates returns up to limit orders after cursor, changed at or
// before until (a sweep does not chase orders changing under it), that either
// ended (a final status) at or after since, or are not final at all, however
// old: an open order whose workflow is gone is exactly what the sweep is for.
// An order that changes while the sweep pages moves behind the cursor and may
// be seen twice, never skipped, since updated_at only grows.
func (s *Store) ReconcileCandidates(ctx context.Context, since, until time.Time, after Cursor, limit int) ([]Candidate, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: page size %d", ErrInvalid, limit)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT o.order_id, o.product_id, o.quantity, o.amount, o.user_id, o.status, o.created_at, o.updated_at,
		       COALESCE(r.state, ''), COALESCE(p.status, ''), COALESCE(p.transaction_key, ''), COALESCE(p.reason, ''),
		       (SELECT count(*) FROM payment_attempts a WHERE a.order_id = o.order_id)
		FROM orders o
		LEFT JOIN reservations r ON r.order_id = o.order_id
		LEFT JOIN payments p ON p.order_id = o.order_id
		WHERE (o.updated_at, o.order_id) > ($2, $3) AND o.updated_at <= $9
		  AND (o.updated_at >= $1 OR o.status NOT IN ($5, $6, $7, $8))
		ORDER BY o.updated_at, o.order_id
		LIMIT $4`, since, after.UpdatedAt, after.OrderID, limit,
		status.OrderConfirmed, status.OrderFailed, status.OrderCancelled, status.OrderRejected, until)
	if err != nil {
		return nil, fmt.Errorf("read reconcile candidates: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Candidate, error) {
		var c Candidate
		o := &c.Order
		err := row.Scan(&o.OrderID, &o.ProductID, &o.Quantity, &o.Amount, &o.UserID, &o.Status, &o.CreatedAt, &o.UpdatedAt,
			&o.Reservation, &o.PaymentStatus, &o.TransactionKey, &o.PaymentReason, &o.Attempts)
		c.Cursor = Cursor{UpdatedAt: o.UpdatedAt, OrderID: o.OrderID}
		return c, err
	})
}

// Flagged reports whether the order's event log already holds an anomaly
// recorded for this finding (its detail's "finding") about this transaction
// in this gateway status: a disagreement is flagged once, not every sweep.
func (s *Store) Flagged(ctx context.Context, orderID, finding, transactionKey, gatewayStatus string) (bool, error) {
	var found bool
	err := s.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM payment_events WHERE order_id = $1 AND kind = $2
		   AND detail->>'finding' = $3 AND COALESCE(detail->>'transaction_key', '') = $4
		   AND COALESCE(detail->>'gateway_status', '') = $5)`,
		orderID, KindAnomaly, finding, transactionKey, gatewayStatus).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("read flags of %s: %w", orderID, err)
	}
	return found, nil
}
