package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// FailFirst makes the first n writes (event "INSERT" or "UPDATE") to table
// fail inside the real database, as a lost connection or an outage would;
// when, if not "", is the trigger's WHEN condition (e.g. "NEW.status =
// 'PENDING'"). The count is a sequence, which is not transactional: a
// failed write counts even though its transaction rolls back. heal drops the
// fault, so the same table can be given another.
func FailFirst(t testing.TB, pool *pgxpool.Pool, n int, event, table, when string) (heal func()) {
	t.Helper()
	ctx := context.Background()
	name := "fault_" + table
	if when != "" {
		when = "WHEN (" + when + ")"
	}
	_, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE SEQUENCE %[1]s;
		CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('%[1]s') <= %[2]d THEN RAISE EXCEPTION 'injected: the database refused the write'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER %[1]s BEFORE %[3]s ON %[4]s FOR EACH ROW %[5]s EXECUTE FUNCTION %[1]s();`, name, n, event, table, when))
	if err != nil {
		t.Fatalf("inject a database fault on %s: %v", table, err)
	}
	return func() {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER %[1]s ON %[2]s; DROP FUNCTION %[1]s; DROP SEQUENCE %[1]s`, name, table)); err != nil {
			t.Errorf("heal the database fault on %s: %v", table, err)
		}
	}
}

// BlockWrites holds every write (event "INSERT" or "UPDATE") to table
// inside the real database until release, as another transaction's lock
// would: a trigger waits for an advisory lock the test holds on a connection
// of its own. WaitLockWaiters(…, 1, "advisory", …) tells when a step waits
// there. release lets the writes through and drops the trigger; the test's
// cleanup calls it too.
func BlockWrites(t testing.TB, pool *pgxpool.Pool, event, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	name := "block_" + table
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("block writes to %s: %v", table, err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(`
		SELECT pg_advisory_lock(hashtext('%[1]s'));
		CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(hashtext('%[1]s')); RETURN NEW; END $$;
		CREATE TRIGGER %[1]s BEFORE %[2]s ON %[3]s FOR EACH ROW EXECUTE FUNCTION %[1]s();`, name, event, table))
	if err != nil {
		conn.Release()
		t.Fatalf("block writes to %s: %v", table, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			defer conn.Release()
			if _, err := conn.Exec(ctx, fmt.Sprintf(`SELECT pg_advisory_unlock(hashtext('%[1]s'));
				DROP TRIGGER %[1]s ON %[2]s; DROP FUNCTION %[1]s`, name, table)); err != nil {
				t.Errorf("let the writes to %s through: %v", table, err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// WaitLockWaiters polls until n backends of pool's database wait on a lock
// (of kind waitEvent, e.g. "advisory", when not ""): the step under test is
// provably blocked where the test holds the lock.
func WaitLockWaiters(t testing.TB, pool *pgxpool.Pool, n int, waitEvent, what string) {
	t.Helper()
	WaitLockWaitersWithin(t, pool, n, waitEvent, what, 30*time.Second)
}

// WaitLockWaitersWithin is WaitLockWaiters with a deadline of its own.
func WaitLockWaitersWithin(t testing.TB, pool *pgxpool.Pool, n int, waitEvent, what string, d time.Duration) {
	t.Helper()
	Eventually(t, d, func() bool {
		var waiting int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND ($1 = '' OR wait_event = $1)`, waitEvent).Scan(&waiting)
		return err == nil && waiting == n
	}, what)
}

// HoldRows locks the rows query selects (a SELECT … FOR UPDATE) in a
// transaction of its own, so a step that writes them blocks there until
// release (which the test's cleanup also calls).
func HoldRows(t testing.TB, pool *pgxpool.Pool, query string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("hold rows: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, query, args...); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("hold rows (%s): %v", query, err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("release the rows held by %s: %v", query, err)
		}
	}
}
