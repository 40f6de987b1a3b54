package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OpenPastDeadline counts the orders not yet final whose deadline has
// passed: each should have been compensated by now, so a count that stays
// above zero means workflows are stuck (docs/design.md §5). An index on the
// open orders' deadlines keeps it cheap enough to run at every scrape.
func (s *Store) OpenPastDeadline(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FROM orders
		WHERE status IN ('RESERVING', 'REQUESTING', 'PENDING') AND deadline < now()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count orders past deadline: %w", err)
	}
	return n, nil
}

// Deadline is the order's own deadline as Reserve recorded it; the zero
// time for an order placed before the column (migration 005) or without one.
func (s *Store) Deadline(ctx context.Context, orderID string) (time.Time, error) {
	var d *time.Time
	err := s.pool.QueryRow(ctx, `SELECT deadline FROM orders WHERE order_id = $1`, orderID).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, ErrNotFound
	}
	if err != nil || d == nil {
		return time.Time{}, err
	}
	return *d, nil
}
