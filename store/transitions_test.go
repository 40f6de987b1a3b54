package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
)

// move is one status change some code path asks the database for.
type move struct{ from, to, by string }

// paymentMoves lists every payment status change the activities and the
// workflows can request, with who requests it. A change missing from the
// transition table fails at run time, non-retryably, in the middle of a
// payment (compensation once failed on REQUESTED→REFUNDED): this list is
// how a new code path's moves get checked before they run.
var paymentMoves = []move{
	{"UNKNOWN", "REQUESTED", "store.BeginAttempt: a granted re-send"},
	{"REQUESTED", "PENDING", "store.FinishAttempt: ACCEPTED"},
	{"REQUESTED", "UNKNOWN", "store.FinishAttempt: UNKNOWN; store.BeginAttempt closing a lost create"},
	{"REQUESTED", "FAILED", "store.FinishAttempt: REJECTED"},
	{"UNKNOWN", "PENDING", "workflow: transaction found by lookup or callback"},
	{"REQUESTED", "PENDING", "workflow: transaction found while the create's answer is unrecorded"},
	{"PENDING", "SUCCESS", "workflow settle"}, {"UNKNOWN", "SUCCESS", "workflow settle"}, {"REQUESTED", "SUCCESS", "workflow settle"},
	{"PENDING", "FAILED", "workflow settle"}, {"UNKNOWN", "FAILED", "workflow settle"}, {"REQUESTED", "FAILED", "workflow settle"},
	{"REQUESTED", "CANCELLED", "workflow compensate"}, {"PENDING", "CANCELLED", "workflow compensate"},
	{"UNKNOWN", "CANCELLED", "workflow compensate"},
	{"REQUESTED", "REFUNDED", "workflow compensate: a charge found and refunded"},
	{"PENDING", "REFUNDED", "workflow compensate"}, {"UNKNOWN", "REFUNDED", "workflow compensate"},
	{"CANCELLED", "REFUNDED", "workflow drainLate, RefundWorkflow"}, {"FAILED", "REFUNDED", "workflow drainLate, RefundWorkflow"},
	{"SUCCESS", "REFUNDED", "RefundWorkflow on a refunded confirmed charge"},
}

// orderMoves lists every order status change requested.
var orderMoves = []move{
	{"RESERVING", "REQUESTING", "store.Reserve"}, {"RESERVING", "REJECTED", "store.Reserve: out of stock"},
	{"REQUESTING", "PENDING", "store.FinishAttempt: ACCEPTED or UNKNOWN"},
	{"REQUESTING", "FAILED", "workflow settle after a rejected create"},
	{"REQUESTING", "CANCELLED", "workflow compensate: unreachable on every try"},
	{"REQUESTING", "CONFIRMED", "workflow settle"}, {"PENDING", "CONFIRMED", "workflow settle"},
	{"PENDING", "FAILED", "workflow settle"}, {"PENDING", "CANCELLED", "workflow compensate"},
}

func TestTransitionTablesAllowEveryRequestedMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	for table, moves := range map[string][]move{"payment_transitions": paymentMoves, "order_transitions": orderMoves} {
		for _, m := range moves {
			var legal bool
			err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE from_status = $1 AND to_status = $2)`,
				m.from, m.to).Scan(&legal)
			assert.NoError(t, err)
			assert.True(t, legal, "%s lacks %s→%s, requested by %s", table, m.from, m.to, m.by)
		}
	}
}

// No move ever leaves a final order status.
func TestFinalOrderStatusesHaveNoWayOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	for _, st := range []status.Order{status.OrderConfirmed, status.OrderFailed, status.OrderCancelled, status.OrderRejected} {
		var n int
		assert.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM order_transitions WHERE from_status = $1`, st).Scan(&n))
		assert.Zero(t, n, "%s is final", st)
	}
}
