// Package store is payguard's PostgreSQL data layer: products and their
// stock counters, orders, one reservation per order, payments with the record
// of every create sent to the gateway, and an append-only event log.
//
// Every operation is one transaction and idempotent per order: repeating it
// (as a Temporal activity retry does) changes nothing the second time. The
// invariants of docs/design.md §3 live in the schema (CHECK constraints, the transition
// tables, a partial unique index), so concurrent callers cannot break them;
// the Go code only turns their refusals into typed errors.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Sentinel errors. Callers test them with errors.Is.
var (
	ErrNotFound           = errors.New("not found")
	ErrUnknownProduct     = errors.New("unknown product")
	ErrOutOfStock         = errors.New("out of stock")
	ErrInvalid            = errors.New("invalid argument")
	ErrOrderMismatch      = errors.New("order exists with other details")
	ErrIllegalTransition  = errors.New("illegal status transition")
	ErrReservationSettled = errors.New("reservation already settled the other way")
	ErrNoReservation      = errors.New("order has no reservation")
	ErrStockInUse         = errors.New("total below reserved plus sold stock")
	// ErrMaybeSent refuses to cancel an order one of whose creates may have
	// reached the gateway, for a caller that did not search the gateway.
	ErrMaybeSent = errors.New("a create of the order may have reached the gateway, which was not searched")
)

// TransitionError says which move was refused. It matches ErrIllegalTransition.
type TransitionError struct {
	Entity  string // "order" or "payment"
	OrderID string
	From    string
	To      string
}

// Error names the refused move.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal %s status transition %s -> %s for order %s", e.Entity, e.From, e.To, e.OrderID)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Store runs payguard's queries over a connection pool.
type Store struct {
	pool     *pgxpool.Pool
	observer Observer
}

// Open connects to databaseURL and checks the connection.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Migrate brings the schema to the newest version. It takes tern's advisory
// lock, so concurrent workers starting together migrate once.
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	m, err := migrate.NewMigrator(ctx, conn.Conn(), "payguard_schema_version")
	if err != nil {
		return fmt.Errorf("create migrator: %w", err)
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil. A commit
// that fails is an error too: the caller must not believe a change landed.
// The event-log lines fn appends are written together just before the
// commit (tx.flush).
//
// With an Observer, a transaction that ended an order (or refunded its
// payment) reads the order's outcome before the commit, and the observer
// hears of it after the commit, never for a transaction rolled back.
func (s *Store) inTx(ctx context.Context, fn func(tx *tx) error) error {
	var hs []heard
	err := pgx.BeginFunc(ctx, s.pool, func(ptx pgx.Tx) error {
		t := &tx{Tx: ptx}
		if err := fn(t); err != nil {
			return err
		}
		var ended map[string]ending
		if s.observer != nil {
			ended = t.endings()
		}
		if err := t.flush(ctx); err != nil {
			return err
		}
		if len(ended) == 0 {
			return nil
		}
		var err error
		hs, err = classify(ctx, t, ended)
		return err
	})
	if err == nil && len(hs) > 0 {
		s.tell(hs)
	}
	return err
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

const (
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeUniqueViolation     = "23505"
	codeNumericOutOfRange   = "22003"
)

// EnsureDatabase creates the database named in databaseURL when it is
// missing, connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if pgCode(err) == "42P04" { // created meanwhile by someone else
		return nil
	}
	return err
}
