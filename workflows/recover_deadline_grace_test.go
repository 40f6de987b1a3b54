package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// A recovery of a refused re-send (f5c8bcd) on an order whose deadline
// has passed gets one --poll-max to live; with --poll-max 1 s (the
// answered grace 1 s, so twice that after a re-send) its held refusal's
// grace outlasts that deadline. The recovery never set listedBy, so
// deadlinePassed (8a40c6a) did not wait for that grace: its last search
// came inside it, listed nothing yet, and the held refusal settled the
// order FAILED. T1, listed SUCCESS half a second later, was refunded as a
// late charge: charged then refunded.
func TestARecoveryHoldsARefusalsGracePastItsDeadline(t *testing.T) {
	r := newTunedRun(t, func(tu *workflows.Tuning) { tu.PollInitial, tu.PollMax = time.Second, time.Second })
	r.recovering(activities.RecoveryOrder{Order: store.Order{Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 2},
		Keys: []string{}, MaybeSent: true, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(-time.Minute)})
	r.lookupReturns(r.successListedFrom(r.start.Add(1500 * time.Millisecond)))
	st, _ := r.recoverOrder(t)
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the held refusal was settled at the recovery's deadline by a search inside its grace; T1 was listed SUCCESS then (lost order)")
}
