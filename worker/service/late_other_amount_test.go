package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli/clitest"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// A signed SUCCESS of another amount under a FAILED order's id is not the
// order's charge (b2589ab: the lookup leaves it out, the sweep flags it and
// leaves the money alone). The endpoint started a RefundWorkflow for it
// with MarkPayment: a charge payguard never asked for refunded, and the
// order's payment booked REFUNDED though nothing of it was charged.
func TestALateSuccessOfAnotherAmountStartsNoRefund(t *testing.T) {
	t.Parallel()
	s, o := clitest.PendingOrder(t, "oa-0001")
	now := time.Now()
	code, _ := s.PostCallback(t, testenv.CallbackBody("oa-0001", o.TransactionKey, gateway.StatusFailed, o.Amount), testenv.Secret, now)
	require.Equal(t, 200, code)
	s.WaitOrder(t, "oa-0001", status.OrderFailed, 30*time.Second)

	const other = "20261130:TR:0000AB"
	code, answer := s.PostCallback(t, testenv.CallbackBody("oa-0001", other, gateway.StatusSuccess, o.Amount+1), testenv.Secret, now)
	assert.Equal(t, 200, code)
	assert.False(t, answer.Accepted)
	// The endpoint starts a refund before it answers: none may exist now.
	_, err := testenv.Temporal(t).DescribeWorkflow(context.Background(), workflows.RefundWorkflowID("oa-0001", other), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "a refund was started for a charge of another amount: %s", answer.Reason)
	after, err := s.Store.GetOrder(context.Background(), "oa-0001")
	require.NoError(t, err)
	assert.Equal(t, status.PaymentFailed, after.PaymentStatus)
}
