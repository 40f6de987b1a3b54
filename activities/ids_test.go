package activities_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
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
		"NUL in product id":      {OrderID: "o1", ProductID: "P1\x00", Quantity: 1, Amount: 5000, UserID: "u1"},
		"NUL in user id":         {OrderID: "o2", ProductID: "P1", Quantity: 1, Amount: 5000, UserID: "u\x00"},
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
