package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

func newOrder(id string, qty int64) store.NewOrder {
	return store.NewOrder{OrderID: id, ProductID: "P1", Quantity: qty, Amount: 10_000, UserID: "u1"}
}

// stocked is a fresh database holding total units of P1: the start of most
// tests here.
func stocked(t *testing.T, total int64) (*store.Store, context.Context) {
	t.Helper()
	ctx := context.Background()
	s := testenv.Store(t)
	_, err := s.SetStock(ctx, "P1", total)
	require.NoError(t, err)
	return s, ctx
}

func requireStock(t *testing.T, s *store.Store, available, reserved, sold int64) {
	t.Helper()
	st, err := s.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: available + reserved + sold, Available: available, Reserved: reserved, Sold: sold}, st)
}

func TestMigrationsApplyOnceAndAreIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	v1, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Positive(t, v1)
	require.NoError(t, s.Migrate(ctx))
	v2, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, v1, v2)
}

func TestSetStock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)

	st, err := s.SetStock(ctx, "P1", 5)
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, st)
	_, err = s.SetStock(ctx, "P1", 5)
	require.NoError(t, err, "setting the same total twice")
	requireStock(t, s, 5, 0, 0)

	_, err = s.Reserve(ctx, newOrder("o1", 2))
	require.NoError(t, err)
	st, err = s.SetStock(ctx, "P1", 8)
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 8, Available: 6, Reserved: 2}, st, "reserved units survive a new total")

	_, err = s.SetStock(ctx, "P1", 1)
	require.ErrorIs(t, err, store.ErrStockInUse)
	requireStock(t, s, 6, 2, 0)

	_, err = s.SetStock(ctx, "P1", -1)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.SetStock(ctx, "", 1)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.GetStock(ctx, "nope")
	require.ErrorIs(t, err, store.ErrUnknownProduct)
}

// SetStocks stocks each product, and stops at the first it cannot set,
// naming it.
func TestSetStocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	require.NoError(t, s.SetStocks(ctx, []string{"A1", "A2"}, 7))
	for _, p := range []string{"A1", "A2"} {
		st, err := s.GetStock(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, store.Stock{ProductID: p, Total: 7, Available: 7}, st)
	}
	err := s.SetStocks(ctx, []string{"A3", "", "A4"}, 1)
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, `set stock of :`)
	_, err = s.GetStock(ctx, "A3")
	require.NoError(t, err, "the products before the bad one are stocked")
	_, err = s.GetStock(ctx, "A4")
	require.ErrorIs(t, err, store.ErrUnknownProduct, "none after it")
}

func TestReserveIsIdempotentAndRejectsShortStock(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 5)

	o, err := s.Reserve(ctx, newOrder("o1", 2))
	require.NoError(t, err)
	assert.Equal(t, status.OrderRequesting, o.Status)
	assert.Equal(t, store.ReservationHeld, o.Reservation)
	_, err = s.Reserve(ctx, newOrder("o1", 2))
	require.NoError(t, err, "a repeated reserve")
	requireStock(t, s, 3, 2, 0)

	_, err = s.Reserve(ctx, newOrder("o1", 3))
	require.ErrorIs(t, err, store.ErrOrderMismatch)

	o, err = s.Reserve(ctx, newOrder("o2", 4))
	require.ErrorIs(t, err, store.ErrOutOfStock)
	assert.Equal(t, status.OrderRejected, o.Status)
	_, err = s.Reserve(ctx, newOrder("o2", 4))
	require.ErrorIs(t, err, store.ErrOutOfStock, "a repeated reserve of a rejected order")
	requireStock(t, s, 3, 2, 0)

	_, err = s.Reserve(ctx, store.NewOrder{OrderID: "o3", ProductID: "ghost", Quantity: 1, Amount: 1, UserID: "u1"})
	require.ErrorIs(t, err, store.ErrUnknownProduct)
	_, err = s.Reserve(ctx, store.NewOrder{OrderID: "o4", ProductID: "P1", Quantity: 0, Amount: 1})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.Reserve(ctx, store.NewOrder{OrderID: "o4", ProductID: "P1", Quantity: 1, Amount: 0})
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestCommitAndRelease(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	for _, id := range []string{"a", "b"} {
		_, err := s.Reserve(ctx, newOrder(id, 3))
		require.NoError(t, err)
	}

	require.NoError(t, s.Commit(ctx, "a", "paid"))
	require.NoError(t, s.Commit(ctx, "a", "paid"), "a repeated commit")
	requireStock(t, s, 4, 3, 3)
	require.ErrorIs(t, s.Release(ctx, "a", "late"), store.ErrReservationSettled)

	require.NoError(t, s.Release(ctx, "b", "failed"))
	require.NoError(t, s.Release(ctx, "b", "failed"), "a repeated release")
	requireStock(t, s, 7, 0, 3)
	require.ErrorIs(t, s.Commit(ctx, "b", "late"), store.ErrReservationSettled)

	require.ErrorIs(t, s.Commit(ctx, "nobody", "x"), store.ErrNoReservation)
}

func TestConcurrentReservationsNeverOversell(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)

	var ok, short atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reserve(ctx, newOrder(testenv.ID("c"), 1))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrOutOfStock):
				short.Add(1)
			default:
				errs <- err
			}
			_ = i
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	assert.EqualValues(t, 10, ok.Load())
	assert.EqualValues(t, 190, short.Load())
	requireStock(t, s, 0, 10, 0)
}

func TestConcurrentCommitAndReleaseTakeEffectOnce(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	_, err := s.Reserve(ctx, newOrder("o1", 4))
	require.NoError(t, err)

	var commits, releases, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				err = s.Commit(ctx, "o1", "race")
				if err == nil {
					commits.Add(1)
				}
			} else {
				err = s.Release(ctx, "o1", "race")
				if err == nil {
					releases.Add(1)
				}
			}
			if errors.Is(err, store.ErrReservationSettled) {
				refused.Add(1)
			} else if err != nil {
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	// Exactly one side won; its repeats were no-ops and the other side was refused.
	require.True(t, (commits.Load() == 20) != (releases.Load() == 20), "commits %d releases %d", commits.Load(), releases.Load())
	assert.EqualValues(t, 20, refused.Load())
	if commits.Load() == 20 {
		requireStock(t, s, 6, 0, 4)
	} else {
		requireStock(t, s, 10, 0, 0)
	}
	events, err := s.Events(ctx, "o1")
	require.NoError(t, err)
	settlements := 0
	for _, e := range events {
		if e.Kind == store.KindReservation && e.From == store.ReservationHeld {
			settlements++
		}
	}
	assert.Equal(t, 1, settlements, "one settlement in the log")
}

func TestAdvanceRefusesIllegalTransitionsAndLogsInOrder(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	_, err := s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)

	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderPending, Payment: status.PaymentPending,
		TransactionKey: "tx1", Cause: "gateway accepted"}))
	confirm := store.Change{OrderID: "o1", Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
		Reservation: store.CommitReservation, Cause: "callback SUCCESS"}
	require.NoError(t, s.Advance(ctx, confirm))
	require.NoError(t, s.Advance(ctx, confirm), "a repeated change")
	before, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, before.Status)
	assert.Equal(t, status.PaymentSuccess, before.PaymentStatus)
	assert.Equal(t, "tx1", before.TransactionKey)

	err = s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderCancelled, Payment: status.PaymentCancelled,
		Reservation: store.ReleaseReservation, Cause: "too late"})
	var te *store.TransitionError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, store.ErrIllegalTransition)
	assert.Equal(t, "CONFIRMED", te.From)
	after, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused change leaves the row unchanged")
	requireStock(t, s, 9, 0, 1)

	err = s.Advance(ctx, store.Change{OrderID: "o1", Payment: status.PaymentPending, Cause: "backwards"})
	require.ErrorIs(t, err, store.ErrIllegalTransition)
	require.ErrorIs(t, s.Advance(ctx, store.Change{OrderID: "ghost", Order: status.OrderFailed, Cause: "x"}), store.ErrNotFound)

	events, err := s.Events(ctx, "o1")
	require.NoError(t, err)
	var orderMoves []string
	for _, e := range events {
		if e.Kind == store.KindOrder {
			orderMoves = append(orderMoves, e.From+">"+e.To)
		}
	}
	assert.Equal(t, []string{">RESERVING", "RESERVING>REQUESTING", "REQUESTING>PENDING", "PENDING>CONFIRMED"}, orderMoves)
	for i := 1; i < len(events); i++ {
		assert.Greater(t, events[i].ID, events[i-1].ID)
		assert.False(t, events[i].At.Before(events[i-1].At))
	}

	_, err = s.Pool().Exec(ctx, `DELETE FROM payment_events`)
	require.Error(t, err, "the event log is append-only")
}

func TestEnsureDatabaseCreatesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	existing := testenv.NewDatabase(t)
	missing := strings.Replace(existing, "payguard_test_", "payguard_ensure_", 1)
	_, err := store.Open(ctx, missing)
	require.Error(t, err, "not there yet")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), devserver.AdminDatabaseURL())
		if err == nil {
			defer conn.Close(context.Background())
			name := strings.TrimPrefix(mustPath(t, missing), "/")
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
	})
	require.NoError(t, store.EnsureDatabase(ctx, missing))
	require.NoError(t, store.EnsureDatabase(ctx, missing), "a second call finds it")
	s, err := store.Open(ctx, missing)
	require.NoError(t, err)
	s.Close()
}

func mustPath(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Path
}

// A transaction writes its event-log lines together just before it commits
// (tx.flush): they keep the order the steps appended them in, with their
// details, and a transaction that is refused leaves none.
func TestTransactionsLogTheirEventsInOrder(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	_, err := s.Reserve(ctx, newOrder("o1", 2))
	require.NoError(t, err)
	begun, err := s.BeginAttempt(ctx, store.AttemptRequest{OrderID: "o1"})
	require.NoError(t, err)
	require.NoError(t, s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: begun.Attempt.No, Outcome: store.OutcomeAccepted, TransactionKey: "tx1"}))
	confirm := store.Change{OrderID: "o1", Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
		Reservation: store.CommitReservation, Cause: "callback SUCCESS"}
	require.NoError(t, s.Advance(ctx, confirm))
	err = s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderCancelled, Payment: status.PaymentCancelled,
		Reservation: store.ReleaseReservation, Cause: "too late"})
	require.ErrorIs(t, err, store.ErrIllegalTransition)

	events, err := s.Events(ctx, "o1")
	require.NoError(t, err)
	var lines []string
	for i, e := range events {
		lines = append(lines, e.Kind+" "+e.From+">"+e.To)
		if i > 0 {
			assert.Greater(t, e.ID, events[i-1].ID)
		}
	}
	assert.Equal(t, []string{
		"ORDER >RESERVING", "RESERVATION >HELD", "ORDER RESERVING>REQUESTING", // Reserve
		"PAYMENT >REQUESTED", "ATTEMPT >SENDING", // BeginAttempt
		"ATTEMPT SENDING>ACCEPTED", "PAYMENT REQUESTED>PENDING", "ORDER REQUESTING>PENDING", // FinishAttempt
		"RESERVATION HELD>COMMITTED", "PAYMENT PENDING>SUCCESS", "ORDER PENDING>CONFIRMED", // confirm; the refused cancel left nothing
	}, lines)
	assert.Equal(t, map[string]any{"product_id": "P1", "quantity": float64(2)}, events[1].Detail)
	assert.Equal(t, "tx1", events[6].Detail["transaction_key"])
}
