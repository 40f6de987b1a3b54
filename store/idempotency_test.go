package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/store"
)

// An Idempotency-Key: held, answered, replayed; a lease that ran out is
// taken up with the same order; a key past its TTL is new again and purged.
func TestIdempotencyKeyLifecycle(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := t.Context()
	_, err := s.SetStock(ctx, "P1", 10)
	require.NoError(t, err)
	begin := func(key, hash, order string, lease time.Duration) store.Idempotent {
		t.Helper()
		got, err := s.BeginIdempotent(ctx, "user-1", key, []byte(hash), order, "P1", lease)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, store.Idempotent{State: store.StateFirst, OrderID: "ord-a"}, begin("k1", "h", "ord-a", time.Minute))
	assert.Equal(t, store.StateInFlight, begin("k1", "h", "ord-b", time.Minute).State, "held by the first")
	require.NoError(t, s.AnswerIdempotent(ctx, "user-1", "k1", 201, []byte(`{"orderId":"ord-a"}`)))
	assert.Equal(t, store.Idempotent{State: store.StateAnswered, OrderID: "ord-a", Code: 201, Answer: []byte(`{"orderId":"ord-a"}`)},
		begin("k1", "h", "ord-c", time.Minute))
	assert.Equal(t, store.StateMismatch, begin("k1", "other", "ord-c", time.Minute).State)

	// A holder whose lease ran out (it died): the next takes the same order.
	assert.Equal(t, store.StateFirst, begin("k2", "h", "ord-d", time.Millisecond).State)
	testenv.Eventually(t, 5*time.Second, func() bool { return begin("k2", "h", "ord-e", time.Minute).State == store.StateFirst },
		"the lease ran out")
	assert.Equal(t, "ord-d", begin("k2", "h", "ord-f", time.Minute).OrderID, "the order of the first holder")
	// A released key is taken up at once, with its order.
	require.NoError(t, s.ReleaseIdempotent(ctx, "user-1", "k2"))
	assert.Equal(t, store.Idempotent{State: store.StateFirst, OrderID: "ord-d", TakenUp: true}, begin("k2", "h", "ord-g", time.Minute),
		"taken up: the first holder may have placed it")
	// Another customer's key of the same name is another key.
	other, err := s.BeginIdempotent(ctx, "user-2", "k1", []byte("other"), "ord-h", "P1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Idempotent{State: store.StateFirst, OrderID: "ord-h"}, other)

	_, err = s.Pool().Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'k1' AND user_id = 'user-1'`)
	require.NoError(t, err)
	assert.Equal(t, store.Idempotent{State: store.StateFirst, OrderID: "ord-i"}, begin("k1", "other", "ord-i", time.Minute), "past its TTL, new")
	_, err = s.Pool().Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'k2'`)
	require.NoError(t, err)
	n, err := s.PurgeIdempotent(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the old key purged")
}

// A product that does not exist is refused by the statement that would
// take the key, which stays as it was: new, or held by its first request.
func TestIdempotencyKeyOfAnUnknownProduct(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := t.Context()
	_, err := s.SetStock(ctx, "P1", 10)
	require.NoError(t, err)
	_, err = s.BeginIdempotent(ctx, "user-1", "k1", []byte("h"), "ord-a", "NOPE", time.Minute)
	require.ErrorIs(t, err, store.ErrUnknownProduct)
	var keys int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	assert.Zero(t, keys, "nothing taken")

	first, err := s.BeginIdempotent(ctx, "user-1", "k2", []byte("h"), "ord-b", "P1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.StateFirst, first.State)
	_, err = s.BeginIdempotent(ctx, "user-1", "k2", []byte("h"), "ord-c", "NOPE", time.Minute)
	require.ErrorIs(t, err, store.ErrUnknownProduct)
	again, err := s.BeginIdempotent(ctx, "user-1", "k2", []byte("h"), "ord-d", "P1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Idempotent{State: store.StateInFlight, OrderID: "ord-b"}, again, "still held by its first request")
}

// SetAvailable sets what new orders may reserve and keeps the rest.
func TestSetAvailableKeepsReservedAndSold(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := t.Context()
	st, err := s.SetAvailable(ctx, "P9", 4)
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P9", Total: 4, Available: 4}, st, "created")
	_, err = s.Reserve(ctx, store.NewOrder{OrderID: "avail-1", ProductID: "P9", Quantity: 3, Amount: 10, UserID: "u"})
	require.NoError(t, err)
	st, err = s.SetAvailable(ctx, "P9", 10)
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P9", Total: 13, Available: 10, Reserved: 3}, st)
	_, err = s.SetAvailable(ctx, "P9", -1)
	assert.ErrorIs(t, err, store.ErrInvalid)
}
