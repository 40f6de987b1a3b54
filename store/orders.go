package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/status"
)

// NewOrder is what Reserve needs to open an order.
type NewOrder struct {
	OrderID   string
	ProductID string
	Quantity  int64
	Amount    int64 // minor units
	UserID    string
	// Deadline is when the workflow gives up on the payment; zero for an
	// order that did not say (it is then never counted past its deadline).
	Deadline time.Time
}

// Reservation states.
const (
	ReservationHeld      = "HELD"
	ReservationCommitted = "COMMITTED"
	ReservationReleased  = "RELEASED"
	// ReservationReturned: a COMMITTED reservation whose order was refunded
	// in full; its units are available again.
	ReservationReturned = "RETURNED"
)

// Order is an order with its reservation and payment as the database holds them.
type Order struct {
	OrderID        string         `json:"orderId"`
	ProductID      string         `json:"productId"`
	Quantity       int64          `json:"quantity"`
	Amount         int64          `json:"amount"`
	UserID         string         `json:"userId"`
	Status         status.Order   `json:"status"`
	Reservation    string         `json:"reservation,omitempty"`
	PaymentStatus  status.Payment `json:"paymentStatus,omitempty"`
	TransactionKey string         `json:"transactionKey,omitempty"`
	PaymentReason  string         `json:"paymentReason,omitempty"`
	Attempts       int            `json:"attempts"`
	CreatedAt      time.Time      `json:"createdAt"`
	UpdatedAt      time.Time      `json:"updatedAt"`
}

// Reserve opens the order and holds its stock, atomically and once: a
// repeated call returns the order as it stands. When stock is short the order
// is recorded REJECTED and ErrOutOfStock is returned (also on every repeat).
func (s *Store) Reserve(ctx context.Context, o NewOrder) (Order, error) {
	// Ids are checked before the transaction: PostgreSQL refuses a NUL byte
	// with an error that looks transient, and a retried Reserve would never end.
	if err := checkIDs(o); err != nil {
		return Order{}, err
	}
	if o.Quantity <= 0 || o.Amount <= 0 {
		return Order{}, fmt.Errorf("%w: order %q product %q quantity %d amount %d",
			ErrInvalid, o.OrderID, o.ProductID, o.Quantity, o.Amount)
	}
	var rejected bool
	err := s.inTx(ctx, func(tx *tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO orders (order_id, product_id, quantity, amount, user_id, status, deadline)
			VALUES ($1, $2, $3, $4, $5, 'RESERVING', $6) ON CONFLICT (order_id) DO NOTHING`,
			o.OrderID, o.ProductID, o.Quantity, o.Amount, o.UserID, nullTime(o.Deadline))
		if pgCode(err) == codeForeignKeyViolation {
			return fmt.Errorf("%w: %s", ErrUnknownProduct, o.ProductID)
		}
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		if tag.RowsAffected() == 0 {
			// A repeat: the order as it stands once any step of it in flight
			// has committed. A run of the first workflow task again reads it
			// to learn what an earlier run did, and that run may still be
			// inside a step (its worker stalled, not dead): without the lock
			// a create that run is beginning would be missed.
			if _, err := lockOrder(ctx, tx, o.OrderID); err != nil {
				return err
			}
			existing, err := getOrder(ctx, tx, o.OrderID)
			if err != nil {
				return err
			}
			if existing.ProductID != o.ProductID || existing.Quantity != o.Quantity || existing.Amount != o.Amount {
				return fmt.Errorf("%w: %s", ErrOrderMismatch, o.OrderID)
			}
			rejected = existing.Status == status.OrderRejected
			return nil
		}
		if err := appendEvent(tx, Event{OrderID: o.OrderID, Kind: KindOrder, To: string(status.OrderReserving), Cause: "order placed"}); err != nil {
			return err
		}
		tag, err = tx.Exec(ctx, `
			UPDATE products SET available = available - $2, reserved = reserved + $2, updated_at = now()
			WHERE product_id = $1 AND available >= $2`, o.ProductID, o.Quantity)
		if err != nil {
			return fmt.Errorf("reserve stock: %w", err)
		}
		if tag.RowsAffected() == 0 {
			rejected = true
			return moveOrder(ctx, tx, o.OrderID, status.OrderRejected, "out of stock")
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO reservations (order_id, product_id, quantity, state) VALUES ($1, $2, $3, 'HELD')`,
			o.OrderID, o.ProductID, o.Quantity); err != nil {
			return fmt.Errorf("insert reservation: %w", err)
		}
		if err := appendEvent(tx, Event{OrderID: o.OrderID, Kind: KindReservation, To: ReservationHeld,
			Cause: "stock reserved", Detail: map[string]any{"product_id": o.ProductID, "quantity": o.Quantity}}); err != nil {
			return err
		}
		return moveOrder(ctx, tx, o.OrderID, status.OrderRequesting, "stock reserved")
	})
	if err != nil {
		return Order{}, err
	}
	order, err := s.GetOrder(ctx, o.OrderID)
	if err != nil {
		return Order{}, err
	}
	if rejected {
		return order, fmt.Errorf("%w: product %s, quantity %d", ErrOutOfStock, o.ProductID, o.Quantity)
	}
	return order, nil
}

// checkIDs holds a new order's ids to the one rule (package ids).
func checkIDs(o NewOrder) error {
	for _, err := range []error{ids.CheckOrder(o.OrderID), ids.CheckProduct(o.ProductID), ids.CheckUser(o.UserID)} {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}

// settleReservation moves a HELD reservation to COMMITTED or RELEASED, or a
// COMMITTED one to RETURNED (its order refunded in full: the sold units
// are available again). The conditional UPDATE locks the row, so of two
// concurrent settlements exactly one matches; the other then sees the
// settled state.
func settleReservation(ctx context.Context, tx *tx, orderID, to, cause string) error {
	from := ReservationHeld
	if to == ReservationReturned {
		from = ReservationCommitted
	}
	var productID string
	var qty int64
	err := tx.QueryRow(ctx, `
		UPDATE reservations SET state = $2, settled_at = now()
		WHERE order_id = $1 AND state = $3
		RETURNING product_id, quantity`, orderID, to, from).Scan(&productID, &qty)
	if errors.Is(err, pgx.ErrNoRows) {
		var current string
		err := tx.QueryRow(ctx, `SELECT state FROM reservations WHERE order_id = $1`, orderID).Scan(&current)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: %s", ErrNoReservation, orderID)
		case err != nil:
			return fmt.Errorf("read reservation: %w", err)
		case current == to:
			return nil
		default:
			return fmt.Errorf("%w: order %s is %s, wanted %s", ErrReservationSettled, orderID, current, to)
		}
	}
	if err != nil {
		return fmt.Errorf("settle reservation: %w", err)
	}
	update := `UPDATE products SET reserved = reserved - $2, sold = sold + $2, updated_at = now() WHERE product_id = $1`
	switch to {
	case ReservationReleased:
		update = `UPDATE products SET reserved = reserved - $2, available = available + $2, updated_at = now() WHERE product_id = $1`
	case ReservationReturned:
		update = `UPDATE products SET sold = sold - $2, available = available + $2, updated_at = now() WHERE product_id = $1`
	}
	if _, err := tx.Exec(ctx, update, productID, qty); err != nil {
		return fmt.Errorf("move stock: %w", err)
	}
	return appendEvent(tx, Event{OrderID: orderID, Kind: KindReservation, From: from, To: to, Cause: cause,
		Detail: map[string]any{"product_id": productID, "quantity": qty}})
}

// Reservation actions for Change.
const (
	KeepReservation    = ""
	CommitReservation  = ReservationCommitted
	ReleaseReservation = ReservationReleased
	ReturnReservation  = ReservationReturned
)

// Change is one step of an order's life: any of a reservation settlement, a
// payment status and an order status, applied together or not at all.
type Change struct {
	OrderID        string
	Order          status.Order   // "" leaves the order's status alone
	Payment        status.Payment // "" leaves the payment's status alone
	TransactionKey string         // recorded on the payment when not ""
	Reason         string         // the gateway's reason, for FAILED payments
	Reservation    string         // KeepReservation, CommitReservation, ReleaseReservation or ReturnReservation
	Cause          string         // why, in words, for the event log
}

// Advance applies a Change in one transaction. Moving to the status already
// held is a no-op, so a retried Advance is harmless; an illegal move returns
// a *TransitionError and changes nothing.
func (s *Store) Advance(ctx context.Context, c Change) error {
	if c.OrderID == "" || c.Cause == "" {
		return fmt.Errorf("%w: change needs an order id and a cause", ErrInvalid)
	}
	return s.inTx(ctx, func(tx *tx) error { return advance(ctx, tx, c) })
}

// advance is Advance inside a transaction the caller holds.
func advance(ctx context.Context, tx *tx, c Change) error {
	// The lock and the transition table's word on the order's move come in
	// one round trip.
	var current status.Order
	var legal bool
	err := tx.QueryRow(ctx, `
		SELECT o.status, EXISTS (SELECT 1 FROM order_transitions t WHERE t.from_status = o.status AND t.to_status = $2)
		FROM orders o WHERE o.order_id = $1 FOR UPDATE OF o`, c.OrderID, string(c.Order)).Scan(&current, &legal)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: order %s", ErrNotFound, c.OrderID)
	}
	if err != nil {
		return fmt.Errorf("lock order: %w", err)
	}
	// Check the order's move before touching stock: a refused move then
	// reports the status it was refused from, not the reservation's state
	// (the transaction rolls back either way).
	if c.Order != "" && c.Order != current && !legal {
		return &TransitionError{Entity: "order", OrderID: c.OrderID, From: string(current), To: string(c.Order)}
	}
	if c.Reservation != KeepReservation {
		if err := settleReservation(ctx, tx, c.OrderID, c.Reservation, c.Cause); err != nil {
			return err
		}
	}
	if c.Payment != "" || c.TransactionKey != "" {
		if err := movePayment(ctx, tx, c); err != nil {
			return err
		}
	}
	if c.Order != "" {
		return moveOrder(ctx, tx, c.OrderID, c.Order, c.Cause)
	}
	return nil
}

// moveOrder changes an order's status when the transition table allows it.
func moveOrder(ctx context.Context, tx *tx, orderID string, to status.Order, cause string) error {
	var from status.Order
	err := tx.QueryRow(ctx, `
		WITH old AS (SELECT status FROM orders WHERE order_id = $1 FOR UPDATE)
		UPDATE orders SET status = $2, updated_at = now()
		FROM old
		WHERE orders.order_id = $1
		  AND EXISTS (SELECT 1 FROM order_transitions t WHERE t.from_status = old.status AND t.to_status = $2)
		RETURNING old.status`, orderID, to).Scan(&from)
	if errors.Is(err, pgx.ErrNoRows) {
		var current status.Order
		err := tx.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, orderID).Scan(&current)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: order %s", ErrNotFound, orderID)
		case err != nil:
			return err
		case current == to:
			return nil
		}
		return &TransitionError{Entity: "order", OrderID: orderID, From: string(current), To: string(to)}
	}
	if err != nil {
		return fmt.Errorf("move order: %w", err)
	}
	return appendEvent(tx, Event{OrderID: orderID, Kind: KindOrder, From: string(from), To: string(to), Cause: cause})
}

// movePayment creates the payment row on first use and otherwise moves it
// along the payment transition table.
func movePayment(ctx context.Context, tx *tx, c Change) error {
	// The lock and the transition table's word on the move (to c.Payment,
	// or to the status held when it is "") come in one round trip.
	var from status.Payment
	var key *string
	var legal bool
	err := tx.QueryRow(ctx, `
		SELECT p.status, p.transaction_key,
		       EXISTS (SELECT 1 FROM payment_transitions t WHERE t.from_status = p.status AND t.to_status = COALESCE(NULLIF($2, ''), p.status))
		FROM payments p WHERE p.order_id = $1 FOR UPDATE OF p`, c.OrderID, string(c.Payment)).Scan(&from, &key, &legal)
	if errors.Is(err, pgx.ErrNoRows) {
		to := c.Payment
		if to == "" {
			to = status.PaymentPending
		}
		if _, err := tx.Exec(ctx, `INSERT INTO payments (order_id, status, transaction_key, reason) VALUES ($1, $2, NULLIF($3, ''), $4)`,
			c.OrderID, to, c.TransactionKey, c.Reason); err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		return appendEvent(tx, Event{OrderID: c.OrderID, Kind: KindPayment, To: string(to), Cause: c.Cause,
			Detail: paymentDetail(c)})
	}
	if err != nil {
		return fmt.Errorf("lock payment: %w", err)
	}
	to := c.Payment
	if to == "" {
		to = from
	}
	sameKey := c.TransactionKey == "" || (key != nil && *key == c.TransactionKey)
	if to == from && sameKey {
		return nil
	}
	if from == status.PaymentSuccess && key != nil && !sameKey {
		// The charge an order was paid with is its identity for every later
		// check (a late callback, a late answer, the sweep): never rewritten.
		return &TransitionError{Entity: "payment", OrderID: c.OrderID, From: "SUCCESS " + *key, To: string(to) + " " + c.TransactionKey}
	}
	if to != from && !legal {
		return &TransitionError{Entity: "payment", OrderID: c.OrderID, From: string(from), To: string(to)}
	}
	if _, err := tx.Exec(ctx, `
		UPDATE payments SET status = $2, transaction_key = COALESCE(NULLIF($3, ''), transaction_key),
		       reason = CASE WHEN $4 = '' THEN reason ELSE $4 END, updated_at = now()
		WHERE order_id = $1`, c.OrderID, to, c.TransactionKey, c.Reason); err != nil {
		return fmt.Errorf("update payment: %w", err)
	}
	return appendEvent(tx, Event{OrderID: c.OrderID, Kind: KindPayment, From: string(from), To: string(to), Cause: c.Cause,
		Detail: paymentDetail(c)})
}

func paymentDetail(c Change) map[string]any {
	d := map[string]any{}
	if c.TransactionKey != "" {
		d["transaction_key"] = c.TransactionKey
	}
	if c.Reason != "" {
		d["reason"] = c.Reason
	}
	return d
}

// GetOrder reads an order with its reservation and payment.
func (s *Store) GetOrder(ctx context.Context, orderID string) (Order, error) {
	return getOrder(ctx, s.pool, orderID)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getOrder(ctx context.Context, q querier, orderID string) (Order, error) {
	var o Order
	var reservation, payment, key, reason *string
	err := q.QueryRow(ctx, `
		SELECT o.order_id, o.product_id, o.quantity, o.amount, o.user_id, o.status, o.created_at, o.updated_at,
		       r.state, p.status, p.transaction_key, p.reason,
		       (SELECT count(*) FROM payment_attempts a WHERE a.order_id = o.order_id)
		FROM orders o
		LEFT JOIN reservations r ON r.order_id = o.order_id
		LEFT JOIN payments p ON p.order_id = o.order_id
		WHERE o.order_id = $1`, orderID).
		Scan(&o.OrderID, &o.ProductID, &o.Quantity, &o.Amount, &o.UserID, &o.Status, &o.CreatedAt, &o.UpdatedAt,
			&reservation, &payment, &key, &reason, &o.Attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("%w: order %s", ErrNotFound, orderID)
	}
	if err != nil {
		return Order{}, fmt.Errorf("read order %s: %w", orderID, err)
	}
	o.Reservation = deref(reservation)
	o.PaymentStatus = status.Payment(deref(payment))
	o.TransactionKey = deref(key)
	o.PaymentReason = deref(reason)
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullTime is NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
