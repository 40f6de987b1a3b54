package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
)

// No create leaves after the order's deadline even when the database is
// slow to record it: BeginAttempt checks the deadline, then waits (here on
// its INSERT, as on any lock or a slow disk) past the deadline. The check
// must hold when the create leaves, not when the transaction began.
func TestNoCreateLeavesAfterTheDeadlineWhileItsRecordWaits(t *testing.T) {
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 10)
	release := testenv.BlockWrites(t, s.Store.Pool(), "INSERT", "payment_attempts")
	const id = "deadline-slow-record"
	placeOrder(t, s, id, "P1", 1, "--deadline", "3s")
	testenv.WaitLockWaiters(t, s.Store.Pool(), 1, "advisory", "the first create's record waits")
	var deadline time.Time
	require.NoError(t, s.Store.Pool().QueryRow(context.Background(), `SELECT deadline FROM orders WHERE order_id = $1`, id).Scan(&deadline))
	testenv.Eventually(t, 10*time.Second, func() bool { return time.Now().After(deadline.Add(200 * time.Millisecond)) },
		"the order's deadline passed while its create waits to be recorded")
	release()
	waitOrder(t, s, id, status.OrderCancelled, 30*time.Second)
	assert.Zero(t, s.Sim.Stats().Orders[id].CreateRequests, "no create of the order reached the gateway after its deadline")
}
