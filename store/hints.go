package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PassHint says whether a lookup hint for the order may be passed on to its
// workflow now: none was passed within every, and fewer than limit in all.
// It counts the hint when it may, in one statement, so every worker of the
// fleet shares the bound. Each hint passed is an event in the workflow's
// history, whose signals Temporal bounds (10 000 a run by default): a flood
// of unsigned callbacks must not spend them, or real ones would be refused.
func (s *Store) PassHint(ctx context.Context, orderID string, every time.Duration, limit int) (bool, error) {
	var passed int
	err := s.pool.QueryRow(ctx, `
		INSERT INTO order_hints (order_id, passed, last_at) VALUES ($1, 1, now())
		ON CONFLICT (order_id) DO UPDATE SET passed = order_hints.passed + 1, last_at = now()
		WHERE order_hints.last_at <= now() - make_interval(secs => $2) AND order_hints.passed < $3
		RETURNING passed`, orderID, every.Seconds(), limit).Scan(&passed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("count the lookup hint of order %s: %w", orderID, err)
	}
	return true, nil
}
