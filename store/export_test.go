package store

import (
	"context"
)

// Test-only doors into the store: the tests exercise the reservation rule
// and the migrations directly, which production reaches only through Advance
// and Open. They are compiled into the tests alone.

// Commit turns the order's held stock into sold stock, once. Committing
// again is a no-op; committing a released reservation is ErrReservationSettled.
func (s *Store) Commit(ctx context.Context, orderID, cause string) error {
	return s.inTx(ctx, func(tx *tx) error { return settleReservation(ctx, tx, orderID, ReservationCommitted, cause) })
}

// Release gives the order's held stock back, once. Releasing again is a
// no-op; releasing a committed reservation is ErrReservationSettled.
func (s *Store) Release(ctx context.Context, orderID, cause string) error {
	return s.inTx(ctx, func(tx *tx) error { return settleReservation(ctx, tx, orderID, ReservationReleased, cause) })
}

// SchemaVersion reports the applied migration version.
func (s *Store) SchemaVersion(ctx context.Context) (int32, error) {
	var v int32
	err := s.pool.QueryRow(ctx, `SELECT version FROM payguard_schema_version`).Scan(&v)
	return v, err
}
