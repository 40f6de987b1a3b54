package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The first create is answered 500; the lookup after its grace lists
// nothing, and the re-send is accepted as T2 at 1 s. The gateway decides
// T2 FAILED and calls back at 2 s, inside the re-send's grace (until 3 s):
// the FAILED is held (2e983f9). A lookup hint at 2.5 s brings a search
// inside the grace, and the gateway, which lists a transaction only a
// while after making it, lists nothing of the order yet. That search
// cleared the held FAILED and nothing held it again: the order no longer
// knew the gateway's FAILED. From 3 s the lookup breaker is open; at the
// deadline (4 s) the last lookup is refused, and the order was compensated
// CANCELLED — a lost order (CANCELLED without an operator's cancel) for a
// card the gateway refused within the deadline. A search that does not
// list the held FAILED's transaction says nothing of it: it stays held, and
// the deadline settles it FAILED as when no search can be made.
func TestASearchNotListingAHeldFailedKeepsItHeld(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2))
	r.lookupReturns(func(in activities.LookupInput) (activities.LookupResult, error) {
		if !r.env.Now().Before(r.start.Add(3 * time.Second)) {
			return breakerOpen(in)
		}
		return nothingFound(in) // T2 not listed yet
	})
	r.callbackAt(2*time.Second, gateway.StatusFailed, txKey)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: "20261130:TR:forged", Status: gateway.StatusFailed})
	}, 2500*time.Millisecond)
	r.cancelsMaybe()
	in := order
	in.Deadline = 4 * time.Second
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, r.env.GetWorkflowResult(&st))
	t.Logf("final %s/%s %s at %s, %d lookups, grants %q", st.Status, st.PaymentStatus, st.TransactionKey, r.env.Now().Sub(r.start), len(r.lookups), grants(r))
	assert.Equal(t, status.OrderFailed, st.Status,
		"the gateway's FAILED for T2 was forgotten after a search that did not list T2; the order was compensated (lost order)")
	assert.Empty(t, r.orderEnd, "no compensation: the gateway decided")
}
