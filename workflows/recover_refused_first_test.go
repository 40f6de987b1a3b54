package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// The order's only create was refused (4xx, recorded REJECTED, payment
// FAILED) and its workflow was gone before it settled the refusal. The
// recovery settles it FAILED — but only when its first search, made the
// moment it starts, lists nothing. With the lookup breaker open then, the
// refusal was never read again (f5c8bcd held it only after a create that
// may have reached the gateway): every later search listed nothing and
// decided nothing, the stock stayed held until the deadline, and the order
// ended CANCELLED without an operator's cancel — a lost order, for a card
// the gateway had refused.
func TestRecoveryOfARefusedFirstCreateFailsOnceLookupsReturn(t *testing.T) {
	r := newRun(t)
	r.recovering(activities.RecoveryOrder{Order: store.Order{Status: status.OrderRequesting, PaymentStatus: status.PaymentFailed, Attempts: 1},
		Keys: []string{}, Rejected: "LIMIT_EXCEEDED", Deadline: r.start.Add(10 * time.Minute)})
	r.lookupReturns(breakerOpen, nothingFound)
	st, took := r.recoverOrder(t)
	assert.Equal(t, status.OrderFailed, st.Status, "the gateway refused the only create; the search lists nothing")
	assert.Less(t, took, time.Minute, "held the stock until the deadline")
}
