package activities_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
)

const rule = "must be 1–64 characters of A–Z a–z 0–9 . _ : -"

// A NUL byte (or any id outside the rule) makes Reserve fail at once and for
// good: InvalidOrder, not retryable, nothing reserved. Before, PostgreSQL's
// encoding error came back as a plain retryable error and the activity was
// retried forever.
func TestReserveWithAnIDOutsideTheRuleIsNotRetried(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	for name, in := range map[string]activities.ReserveInput{
		"NUL in order id":        {OrderID: "o\x00", ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u1"},
		"NUL in product id":      {OrderID: "ord-o1", ProductID: "P1\x00", Quantity: 1, Amount: 5000, UserID: "u1"},
		"NUL in user id":         {OrderID: "ord-o2", ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u\x00"},
		"200-character order id": {OrderID: strings.Repeat("o", 200), ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u1"},
	} {
		_, err := r.env.ExecuteActivity(r.acts.Reserve, in)
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrInvalidOrder, kind, name)
		assert.False(t, retry, "%s: retrying cannot mend an id", name)
		assert.ErrorContains(t, err, rule, name)
	}
	st, err := r.store.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	assert.Equal(t, int64(5), st.Available, "nothing reserved")
}

// A user id with a CR cannot go into an HTTP header: the create cannot even
// be built. That is our bug, never an outage signal: the activity refuses it
// as InvalidOrder, not retryable, before it records an attempt — so nothing
// is counted UNREACHABLE, no create is observed and the gateway sees nothing.
// Before, it came back as a retryable GatewayUnreachable and the attempt was
// recorded UNREACHABLE.
func TestRequestThatCannotBeBuiltIsOurBugNotUnreachable(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "ord-o1")
	in := request("ord-o1")
	in.UserID = "u\r"
	_, err := r.env.ExecuteActivity(r.acts.RequestPayment, in)
	kind, retry := appError(t, err)
	assert.Equal(t, activities.ErrInvalidOrder, kind)
	assert.False(t, retry)
	assert.ErrorContains(t, err, `user id "u\r" `+rule)
	assert.Empty(t, r.attempts(t, "ord-o1"), "no attempt recorded: nothing was sent")
	o := r.payment(t, "ord-o1")
	assert.Equal(t, status.OrderRequesting, o.Status)
	assert.Empty(t, o.PaymentStatus, "no payment begun")
	assert.Zero(t, r.sim.Stats().Requests["create"])
	assert.Empty(t, r.calls, "no gateway call observed")
}

// A lookup by an order id outside the rule is refused by the client before
// any connection: not retryable, and not held against the gateway by the
// breaker. Before, it was sent.
func TestLookupByAnOrderIDOutsideTheRuleIsRefusedAndNotCounted(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	for range 10 {
		_, err := r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "o\x00"})
		kind, retry := appError(t, err)
		assert.Equal(t, activities.ErrInvalidOrder, kind)
		assert.False(t, retry)
	}
	assert.Zero(t, r.sim.Stats().Requests["lookup"], "nothing reached the gateway")
	c := r.breaker.Counts()
	assert.Zero(t, c.TotalSuccesses+c.TotalFailures, "the breaker counted nothing for or against the gateway")
}
