package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/store"
)

// rule is the tail of the message every id refusal carries.
const rule = "must be 1–64 characters of A–Z a–z 0–9 . _ : -"

// requireRefused reserves each order and requires the id rule's refusal.
func requireRefused(t *testing.T, s *store.Store, orders map[string]store.NewOrder) {
	t.Helper()
	for name, o := range orders {
		_, err := s.Reserve(context.Background(), o)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		assert.ErrorContains(t, err, rule, name)
	}
}

func orderWith(orderID, productID, userID string) store.NewOrder {
	return store.NewOrder{OrderID: orderID, ProductID: productID, Quantity: 1, Amount: 100, UserID: userID}
}

// An id outside the rule is refused before the transaction starts, as
// ErrInvalid: no order row, no event, stock untouched. Before, a 200-character
// id reserved stock (and failed later at the gateway), and a NUL byte came
// back as PostgreSQL's encoding error, which the Reserve activity retried
// forever.
func TestReserveRefusesIDsOutsideTheRuleBeforeTouchingStock(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	requireRefused(t, s, map[string]store.NewOrder{
		"200-character order id": orderWith(strings.Repeat("o", 200), "P1", "u1"),
		"NUL in order id":        orderWith("o\x001", "P1", "u1"),
		"NUL in product id":      orderWith("o2", "P1\x00", "u1"),
		"NUL in user id":         orderWith("o3", "P1", "u\x00"),
		"CR in user id":          orderWith("o4", "P1", "u\r"),
		"space in order id":      orderWith("o 5", "P1", "u1"),
	})
	var orders, events int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM payment_events)`).Scan(&orders, &events))
	assert.Zero(t, orders, "no order row")
	assert.Zero(t, events, "no event")
	requireStock(t, s, 10, 0, 0)
}

// The boundaries: 64 characters and every allowed punctuation mark are
// stored as given; 65 characters and empty ids are refused. SetStock holds
// product ids to the same rule.
func TestIDBoundariesInTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	for _, p := range []string{"P1", "p.1_x:y-z"} {
		_, err := s.SetStock(ctx, p, 10)
		require.NoError(t, err, p)
	}
	for _, id := range []string{strings.Repeat("a", 64), "o.1", "o_1", "o:1", "o-1", "a.b_c:d-e"} {
		o, err := s.Reserve(ctx, orderWith(id, "p.1_x:y-z", "u.1_x:y-z"))
		require.NoError(t, err, id)
		assert.Equal(t, id, o.OrderID)
		assert.Equal(t, "u.1_x:y-z", o.UserID)
	}
	requireRefused(t, s, map[string]store.NewOrder{
		"65-character order id":   orderWith(strings.Repeat("a", 65), "P1", "u1"),
		"empty order id":          orderWith("", "P1", "u1"),
		"65-character user id":    orderWith("o-user-65", "P1", strings.Repeat("u", 65)),
		"empty user id":           orderWith("o-user-empty", "P1", ""),
		"65-character product id": orderWith("o-product-65", strings.Repeat("p", 65), "u1"),
	})
	for _, p := range []string{strings.Repeat("p", 65), "", "P 1", "P1\x00", "P/1"} {
		_, err := s.SetStock(ctx, p, 1)
		require.ErrorIs(t, err, store.ErrInvalid, "product id %q", p)
		assert.ErrorContains(t, err, rule)
	}
	requireStock(t, s, 10, 0, 0)
}
