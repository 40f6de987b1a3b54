package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// timedOut is a create whose answer never came (a read timeout): its
// lookup waits the full unknown grace.
func timedOut(attempts int) func() (activities.RequestResult, error) {
	return func() (activities.RequestResult, error) {
		return activities.RequestResult{}, temporal.NewNonRetryableApplicationError("read timeout", activities.ErrGatewayOutcomeUnknown,
			errors.New("read timeout"), activities.RequestFailure{Attempt: 1, Attempts: attempts})
	}
}

// A create timed out 4 s before the deadline: at the deadline the workflow
// waits out its grace (awaitListing, until 10 s) before the last lookup. An
// operator's cancel 2 s into that wait ended the wait — and then the
// workflow went on as if the deadline alone had ended it: compensated
// under "deadline passed without a definitive answer" and completed, not
// cancelled. The operator's cancel was recorded nowhere, and the order
// counted as lost (CANCELLED without an operator's cancel, store.Outcomes).
func TestAnOperatorsCancelDuringTheDeadlinesGraceIsTheOperators(t *testing.T) {
	r := newRun(t)
	in := order
	in.Deadline = 4 * time.Second
	r.requestReturns(timedOut(1))
	r.env.OnActivity(a.LookupPayment, mock.Anything, mock.Anything).Return(nothingFound).Maybe()
	r.cancelsSucceed(0)
	r.env.RegisterDelayedCallback(func() { r.env.CancelWorkflow() }, 6*time.Second)
	r.defaultReserve()
	r.env.ExecuteWorkflow(workflows.PaymentWorkflowName, in)
	require.True(t, r.env.IsWorkflowCompleted())
	err := r.env.GetWorkflowError()
	var canceled *temporal.CanceledError
	assert.True(t, errors.As(err, &canceled), "an operator's cancel ends the workflow cancelled, got %v", err)
	require.NotEmpty(t, r.orderEnd, "compensated")
	assert.Equal(t, store.CauseOperatorCancel, r.orderEnd[len(r.orderEnd)-1].Cause,
		"the order's CANCELLED must name the operator's cancel, or it counts as a lost order")
}
