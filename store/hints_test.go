package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
)

// PassHint passes one hint per order per interval, and no more than the
// order's bound in all; another order has its own.
func TestPassHintBoundsHintsPerOrder(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := t.Context()
	pass := func(order string, every time.Duration, limit int) bool {
		ok, err := s.PassHint(ctx, order, every, limit)
		require.NoError(t, err)
		return ok
	}
	assert.True(t, pass("order-a", time.Hour, 100), "the first")
	assert.False(t, pass("order-a", time.Hour, 100), "a repeat within the interval")
	assert.True(t, pass("order-b", time.Hour, 100), "another order's first")
	for i := range 2 {
		assert.True(t, pass("order-c", 0, 3), "hint %d within the bound", i+1)
	}
	assert.True(t, pass("order-c", 0, 3))
	assert.False(t, pass("order-c", 0, 3), "past the bound")
}
