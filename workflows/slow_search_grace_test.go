package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// The first create is answered 500 after creating T1, which the gateway
// lists only from 4 s on; the re-send (at 2 s: the grant's lookup takes a
// second) is accepted as T2, its answered grace ends at 4 s (listedBy), and
// the gateway decides T2 FAILED at 3 s: the FAILED is held (2e983f9). A
// lookup hint at 3.2 s brings a search asked inside the grace; the gateway
// answers it slowly, a second later, with what it listed when asked: T2
// FAILED only. decide judged that search by when its answer was read
// (past listedBy), not when it was asked, and settled the order FAILED:
// T1's SUCCESS, listed from 4 s, was refunded as a late charge (charged
// then refunded, a lost order). poll already dates a lookup by its asking
// ("nor pass for one made after the grace").
func TestASlowSearchAskedInsideAReSendsGraceDoesNotDecideItsFailed(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2))
	listedFrom := r.start.Add(4 * time.Second)
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, in activities.LookupInput) (activities.LookupResult, error) {
			// The mock runs once its second has passed: it answers what the
			// gateway listed when asked, a second earlier.
			now := r.env.Now().Add(-time.Second)
			r.mu.Lock()
			r.lookups = append(r.lookups, in)
			resent := len(r.sent) >= 2
			r.mu.Unlock()
			if !resent {
				return nothingFound(in)
			}
			return listedAfterReSend(in, now, listedFrom)
		})
	r.callbackAt(3*time.Second, gateway.StatusFailed, txKey)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(workflows.LookupHintSignal, workflows.LookupHint{TransactionKey: "20261130:TR:forged", Status: gateway.StatusFailed})
	}, 3200*time.Millisecond)
	r.cancelsMaybe()
	st := r.execute(t)
	t.Logf("final %s/%s %s at %s, %d lookups, grants %q", st.Status, st.PaymentStatus, st.TransactionKey, r.env.Now().Sub(r.start), len(r.lookups), grants(r))
	assert.Equal(t, status.OrderConfirmed, st.Status,
		"a search asked inside the re-send's grace, answered after it, decided T2's FAILED; T1 was listed SUCCESS (lost order)")
	assert.Equal(t, t1, st.TransactionKey)
}
