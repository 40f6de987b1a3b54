package store

import (
	"context"
	"fmt"
)

// KindRefund is the event of a charge refunded at the gateway, recorded
// once per (order, transaction) by RecordRefund.
const KindRefund = "REFUND"

// RecordRefund notes that the gateway refunded the order's charge key of
// amount. It is idempotent: first is true only for the call that recorded
// it, which alone appends the REFUND event, so a charge refunded by two
// nets, or by a retried cancel, counts once.
func (s *Store) RecordRefund(ctx context.Context, orderID, key string, amount int64) (first bool, err error) {
	if orderID == "" || key == "" {
		return false, fmt.Errorf("%w: a refund needs an order id and a transaction key", ErrInvalid)
	}
	err = s.inTx(ctx, func(tx *tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO refunds (order_id, transaction_key, amount) VALUES ($1, $2, $3)
			ON CONFLICT (order_id, transaction_key) DO NOTHING`, orderID, key, amount)
		if err != nil {
			return fmt.Errorf("record refund of %s for order %s: %w", key, orderID, err)
		}
		if first = tag.RowsAffected() == 1; first {
			return appendEvent(tx, Event{OrderID: orderID, Kind: KindRefund, Cause: "charge refunded at the gateway",
				Detail: map[string]any{"transaction_key": key, "amount": amount}})
		}
		return nil
	})
	return first, err
}
