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

// An order whose create timed out (UNKNOWN: the request may still be on
// the wire, and the gateway may list its transaction up to --unknown-grace
// later) lost its PaymentWorkflow right after; a recovery starts. Its
// order's deadline has passed, so it lives one --poll-max (1 s here, under
// the 10 s unknown grace, as eeb4bca's case). PaymentWorkflow's deadline
// waits out that grace before its last lookup (awaitListing, 8a40c6a);
// eeb4bca gave the recovery that wait for a held refusal only. The
// recovery's last search came inside the create's grace, found nothing,
// and the order was compensated CANCELLED; T1, listed SUCCESS at 5 s, was
// refunded as a late charge: charged then refunded, a lost order. Not
// knowing when that create left, the recovery waits a full unknown grace
// from its start before its deadline's last search.
func TestARecoveryWaitsOutAnUnknownCreatesGracePastItsDeadline(t *testing.T) {
	r := newTunedRun(t, func(tu *workflows.Tuning) { tu.PollInitial, tu.PollMax = time.Second, time.Second })
	r.recovering(activities.RecoveryOrder{Order: store.Order{Status: status.OrderPending, PaymentStatus: status.PaymentUnknown, Attempts: 1},
		Keys: []string{}, MaybeSent: true, Deadline: r.start.Add(-time.Second)})
	r.lookupReturns(r.successListedFrom(r.start.Add(5 * time.Second)))
	st, _ := r.recoverOrder(t)
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"the recovery's last search came inside the unknown create's grace; T1 was listed SUCCESS after it (lost order)")
}
