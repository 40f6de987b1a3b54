package workflows_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// rule and orderRule end a refusal's message: order ids are 6–64
// characters, others 1–64; rule matches both.
const (
	rule      = "must be 1–64 characters of A–Z a–z 0–9 . _ : -"
	orderRule = "must be 6–64 characters of A–Z a–z 0–9 . _ : -"
	anyRule   = "–64 characters of A–Z a–z 0–9 . _ : -"
)

// reserveSeen makes Reserve answer out of stock (so an accepted order ends
// at once, REJECTED) and records what it was asked.
func (r *run) reserveSeen() *[]activities.ReserveInput {
	var seen []activities.ReserveInput
	r.reserveSet = true
	r.env.OnActivity(a.Reserve, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReserveInput) (activities.ReserveResult, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		seen = append(seen, in)
		return activities.ReserveResult{}, temporal.NewNonRetryableApplicationError("out of stock", activities.ErrOutOfStock, nil)
	}).Maybe()
	return &seen
}

// requireRefused checks the workflow failed with a non-retryable
// InvalidOrder that states the rule.
func requireRefused(t *testing.T, r *run) {
	t.Helper()
	require.True(t, r.env.IsWorkflowCompleted())
	err := r.env.GetWorkflowError()
	require.Error(t, err, "the workflow must refuse the order")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrInvalidOrder, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), anyRule)
}

// An order whose ids break the rule fails at once with a non-retryable
// InvalidOrder, before Reserve is ever scheduled: nothing is held. Before, a
// 200-character order id reserved stock (and failed later at the gateway),
// a NUL byte sent Reserve into endless retries, and a CR in the user id made
// every create "unreachable".
func TestIDsOutsideTheRuleFailBeforeReserve(t *testing.T) {
	for name, change := range map[string]func(*workflows.PaymentInput){
		"200-character order id": func(in *workflows.PaymentInput) { in.OrderID = strings.Repeat("o", 200) },
		"NUL in order id":        func(in *workflows.PaymentInput) { in.OrderID = "o\x001" },
		"NUL in product id":      func(in *workflows.PaymentInput) { in.ProductID = "P1\x00" },
		"CR in user id":          func(in *workflows.PaymentInput) { in.UserID = "u\r" },
		"empty user id":          func(in *workflows.PaymentInput) { in.UserID = "" },
		"slash in product id":    func(in *workflows.PaymentInput) { in.ProductID = "P/1" },
	} {
		t.Run(name, func(t *testing.T) {
			r := newRun(t)
			seen := r.reserveSeen()
			bad := order
			change(&bad)
			r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, bad)
			requireRefused(t, r)
			assert.Empty(t, *seen, "Reserve was never scheduled")
		})
	}
}

// The boundaries: 64 characters and every allowed punctuation mark pass to
// Reserve unchanged; 65 characters are refused before it.
func TestIDBoundariesInTheWorkflow(t *testing.T) {
	for _, id := range []string{strings.Repeat("a", 64), "order.1", "order_1", "order:1", "order-1", "a.b_c:d-e", "ord-12"} {
		t.Run("accepts "+id[:min(len(id), 8)], func(t *testing.T) {
			r := newRun(t)
			seen := r.reserveSeen()
			in := order
			in.OrderID, in.ProductID, in.UserID = id, id, id
			r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
			require.True(t, r.env.IsWorkflowCompleted())
			require.NoError(t, r.env.GetWorkflowError())
			var st workflows.State
			require.NoError(t, r.env.GetWorkflowResult(&st))
			assert.Equal(t, status.OrderRejected, st.Status, "it reached Reserve (out of stock here)")
			require.Len(t, *seen, 1)
			assert.Equal(t, activities.ReserveInput{OrderID: id, ProductID: id, Quantity: in.Quantity, Amount: in.Amount, UserID: id,
				Deadline: st.Deadline}, (*seen)[0], "the deadline is recorded with the order")
		})
	}
	for field, change := range map[string]func(*workflows.PaymentInput){
		"order id":   func(in *workflows.PaymentInput) { in.OrderID = strings.Repeat("o", 65) },
		"product id": func(in *workflows.PaymentInput) { in.ProductID = strings.Repeat("p", 65) },
		"user id":    func(in *workflows.PaymentInput) { in.UserID = strings.Repeat("u", 65) },
	} {
		t.Run("refuses a 65-character "+field, func(t *testing.T) {
			r := newRun(t)
			seen := r.reserveSeen()
			in := order
			change(&in)
			r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
			requireRefused(t, r)
			assert.Contains(t, r.env.GetWorkflowError().Error(), field)
			assert.Empty(t, *seen)
		})
	}
}
