package workflows_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"time"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
)

// lookupDown is a lookup endpoint answering 503 on every try (not the
// breaker: a retryable LookupFailed).
func lookupDown(activities.LookupInput) (activities.LookupResult, error) {
	return activities.LookupResult{}, temporal.NewApplicationErrorWithCause("lookup: gateway outcome unknown: HTTP 503",
		activities.ErrLookupFailed, errors.New("HTTP 503"))
}

// The order's first create never reached the gateway (connect refused,
// recorded UNREACHABLE: provably nothing there); its retry was accepted as
// the order's only transaction, and the gateway then SIGNED a FAILED
// callback for it. The lookup endpoint is unavailable meanwhile (the
// lookup breaker open, or lookups answered 503), creates and callbacks
// work. The gateway decided FAILED and no other transaction can exist, so
// the order ends FAILED: no search is asked for (no create was re-sent),
// and none is missed. Found by review: the search once followed any second
// create, its refusal dropped the answer, and the deadline compensated the
// order — CANCELLED without an operator's cancel, a lost order.
func TestASignedFailedAfterAnUnreachableTryIsNotLost(t *testing.T) {
	for _, c := range []struct {
		name   string
		lookup func(activities.LookupInput) (activities.LookupResult, error)
	}{
		{"lookup breaker open", breakerOpen},
		{"lookups answered 503", lookupDown},
		// Only the lookup by order id fails: a lookup by key answers FAILED.
		{"only the search fails", func(in activities.LookupInput) (activities.LookupResult, error) {
			if in.TransactionKey == "" {
				return lookupDown(in)
			}
			return found(gateway.StatusFailed)(in)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			r.requestReturns(failing(activities.ErrGatewayUnreachable, true, 1, ""), accepted(2))
			r.lookupReturns(c.lookup)
			r.callbackAt(20*time.Second, gateway.StatusFailed, txKey)
			st := r.execute(t)
			require.Equal(t, 2, st.Attempts, "the UNREACHABLE try and the accepted one")
			assert.Equal(t, status.OrderFailed, st.Status, "the gateway signed FAILED for the order's only transaction")
			assert.Equal(t, status.PaymentFailed, st.PaymentStatus)
			if len(r.orderEnd) > 0 {
				t.Errorf("compensated (lost order): cause %q, payment %q", r.orderEnd[0].Cause, r.orderEnd[0].Payment)
			}
		})
	}
}

// After a re-send, a FAILED answer waits for a search by order id; when no
// search can be made before the deadline, the gateway's FAILED settles the
// order there — FAILED, not compensated into a lost order.
func TestAHeldFailedSettlesAtTheDeadlineWhenNoSearchCanBeMade(t *testing.T) {
	r := newRun(t)
	r.requestReturns(answered500(1), accepted(2))
	r.lookupReturns(nothingFound, breakerOpen)
	r.callbackAt(20*time.Second, gateway.StatusFailed, txKey)
	st := r.execute(t)
	assert.Equal(t, status.OrderFailed, st.Status)
	assert.Equal(t, status.PaymentFailed, st.PaymentStatus)
	assert.Empty(t, r.orderEnd, "not compensated")
	assert.GreaterOrEqual(t, len(r.lookups), 3, "searches were tried")
}
