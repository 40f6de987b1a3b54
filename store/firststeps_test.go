package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// woken waits for the watch's wake-up, at most a generous bound.
func woken(t *testing.T, w *store.Watch, what string) {
	t.Helper()
	select {
	case <-w.Woken:
	case <-time.After(10 * time.Second):
		t.Fatalf("not woken: %s", what)
	}
}

func listening(t *testing.T, f *store.FirstSteps) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, f.Listening, "the first-step listener listens")
}

// An order leaving RESERVING is heard when its transaction commits, by the
// watches of that order only; a repeated Reserve, or a move rolled back,
// is not announced.
func TestFirstStepsHearTheReservationsCommit(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 1)
	f := s.ListenFirstSteps(nil)
	defer f.Close()
	listening(t, f)

	w1, w2, w9 := f.Watch("o1"), f.Watch("o2"), f.Watch("o9")
	defer w1.Close()
	defer w2.Close()
	defer w9.Close()
	require.True(t, w1.Listening())
	_, err := s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)
	woken(t, w1, "o1 reserved")
	assert.Equal(t, status.OrderRequesting, w1.Heard(), "the step announced")
	_, err = s.Reserve(ctx, newOrder("o2", 1))
	require.ErrorIs(t, err, store.ErrOutOfStock)
	woken(t, w2, "o2 rejected")
	assert.Equal(t, status.OrderRejected, w2.Heard())
	assert.Empty(t, w9.Heard())

	// A repeat, and a move out of RESERVING rolled back: no notification.
	// Notifications come in commit order, so once o3's is heard, none of
	// them is still on its way.
	_, err = s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO orders (order_id, product_id, quantity, amount, user_id, status)
		VALUES ('o9', 'P1', 1, 1, 'u1', 'RESERVING')`)
	require.NoError(t, err)
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = 'o9'`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	w3 := f.Watch("o3")
	defer w3.Close()
	_, err = s.Reserve(ctx, newOrder("o3", 1))
	require.ErrorIs(t, err, store.ErrOutOfStock)
	woken(t, w3, "o3 rejected")
	assert.Empty(t, w1.Woken, "a repeated Reserve is not announced")
	assert.Empty(t, w2.Woken)
	assert.Empty(t, w9.Woken, "a move rolled back is not announced")
	assert.True(t, w1.Listening())
}

// When the listening connection drops, every watch is woken and says it
// may have missed its notification; the listener reconnects, and a watch
// begun then hears its order.
func TestFirstStepsDropWakesEveryWatchAndReconnects(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 1)
	downs := make(chan error, 16)
	f := s.ListenFirstSteps(func(err error) {
		select {
		case downs <- err:
		default:
		}
	})
	defer f.Close()
	listening(t, f)

	w := f.Watch("o1")
	defer w.Close()
	require.True(t, w.Listening())
	var killed int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'payguard-first-steps' AND datname = current_database()`).Scan(&killed))
	require.Equal(t, 1, killed, "one listening connection")
	woken(t, w, "the connection dropped")
	assert.False(t, w.Listening(), "its notification may be lost")
	select {
	case err := <-downs:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("onDown not told")
	}

	listening(t, f)
	assert.False(t, w.Listening(), "begun before the drop: still may have missed it")
	again := f.Watch("o1")
	defer again.Close()
	require.True(t, again.Listening())
	_, err := s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)
	woken(t, again, "o1 reserved, heard after the reconnection")
	assert.Equal(t, status.OrderRequesting, again.Heard())
}
