package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
)

// The create: sending the charge request, and re-sending it only when the
// gateway provably never took it.

type sendResult int

const (
	sendAccepted sendResult = iota
	sendUnknown
	sendRejected
	sendUnreachable
)

// send runs the create and classifies how it ended. grant authorises a
// re-send past an unknown outcome ("" for the first send).
//
// The create's budget is counted by the activity in the database, where a
// create that timed out still counts, and Temporal retries without an
// attempt limit: a database outage before anything is sent is waited out,
// and every ending is one of the four results, never an error.
func (p *payment) send(ctx workflow.Context, grant string) (sendResult, error) {
	in := activities.RequestInput{OrderID: p.in.OrderID, Amount: p.in.Amount, UserID: p.in.UserID, CardType: p.in.CardType,
		CardNo: p.in.CardNo, Limit: p.tuning.RequestAttempts, Grant: grant}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: p.tuning.RequestTimeout,
		// An operator's cancel must not leave a create on the wire behind our
		// back: wait for it to end, then compensation knows what to look for.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
			// The activity already marks these non-retryable; listing them
			// again guards against a future activity that forgets.
			NonRetryableErrorTypes: createAnswers,
		},
		Summary: fmt.Sprintf("Charge %d for order %s (%s card %s, create %d of at most %d)", p.in.Amount, p.in.OrderID,
			p.in.CardType, gateway.MaskCardNo(p.in.CardNo), p.state.Attempts+1, p.tuning.RequestAttempts),
	}
	var res activities.RequestResult
	regular, err := p.sendLocally(ctx, in, opts, &res)
	if regular {
		p.publish(ctx) // REQUESTING, while Temporal retries it (run deferred it)
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.RequestPayment, in).Get(ctx, &res)
	}
	if err == nil {
		p.countAttempts(res.Attempt, res.Attempts)
		p.maybeAtGateway = true
		p.track(res.TransactionKey)
		p.state.TransactionKey = res.TransactionKey
		p.setStatus(ctx, status.OrderPending, status.PaymentPending)
		return sendAccepted, nil
	}
	var canceled *temporal.CanceledError
	if ctx.Err() != nil && errors.As(err, &canceled) {
		// Cancelled while sending: whatever happened, look for it when compensating.
		p.maybeAtGateway = true
		return 0, err
	}
	// A create that ended with an answer while an operator's cancel waited
	// for it is classified like any other: a refusal recorded FAILED must be
	// settled FAILED, not compensated.
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var failure activities.RequestFailure
		if appErr.HasDetails() {
			_ = appErr.Details(&failure)
		}
		p.countAttempts(max(failure.Attempt, 1), failure.Attempts)
		switch appErr.Type() {
		case activities.ErrGatewayUnreachable, activities.ErrRequestBreakerOpen:
			// It never left. Temporal retries these at the breaker's pace;
			// they end here only past the create's budget.
			return sendUnreachable, nil
		case activities.ErrGatewayRejected:
			p.state.Reason = failure.Code
			p.setStatus(ctx, "", status.PaymentFailed)
			return sendRejected, nil
		}
		// Any other failure may have come after the create left: the
		// outcome is unknown, never "payment failed".
	}
	p.maybeAtGateway = true
	p.unknownSince = workflow.Now(ctx)
	p.setStatus(ctx, status.OrderPending, status.PaymentUnknown)
	p.log.Warn("create outcome unknown; looking the order up instead of re-sending", "error", err)
	return sendUnknown, nil
}

// sendLocally runs the create as a local activity: a happy-path order then asks the server for no activity at all. It runs where
// an operator's cancel cannot reach it, as Reserve does: a cancelled local
// activity's future resolves at once, while the create may still be on the
// wire, and an answer in hand is worth more than a prompt cancel. The
// activity itself decides what may be sent (store.BeginAttempt), so a task
// run again after its worker died mid-create never sends a second charge
// the database would not allow.
//
// It gets one try. A create that fails in a way Temporal would retry (the
// gateway unreachable, the database away, the request breaker open) goes on
// as a regular activity with the given options (regular true): Temporal then
// retries it for as long as it takes, at the breaker's pace and at no cost to
// the history, and an operator's cancel stops it between tries. Local tries
// would not see that cancel until their task completed, and each could send
// a new charge after it.
func (p *payment) sendLocally(ctx workflow.Context, in activities.RequestInput, opts workflow.ActivityOptions,
	res *activities.RequestResult) (regular bool, err error) {
	lopts := workflow.LocalActivityOptions{
		StartToCloseTimeout:    opts.StartToCloseTimeout,
		ScheduleToCloseTimeout: opts.StartToCloseTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                opts.Summary,
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	err = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(dctx, lopts), a.RequestPayment, in).Get(ctx, res)
	if err == nil || !createRetryable(err) {
		return false, err
	}
	p.log.Warn("create failed on its local try; going on as a regular activity", "error", err)
	return true, nil
}

// createRetryable: a create's error that Temporal would retry under the
// create's options — not one of the activity's answers (an outcome unknown,
// a refusal, an illegal transition, a create the client cannot build).
func createRetryable(err error) bool {
	return retriedUnless(err, createAnswers) // a timeout too: the next try asks the database what went out
}

// createAnswers are the create's non-retryable error types.
var createAnswers = []string{activities.ErrGatewayOutcomeUnknown, activities.ErrGatewayRejected,
	activities.ErrIllegalTransition, activities.ErrInvalidOrder}

// countAttempts takes the database's count of the order's creates when the
// activity reports it, and otherwise adds the Temporal attempts.
func (p *payment) countAttempts(tries, recorded int) {
	if recorded > 0 {
		p.state.Attempts = recorded
		return
	}
	p.state.Attempts += tries
}

// resendDue: the latest create's outcome is unknown, the grace period has
// passed and the gateway still knows no transaction of this order — so it
// never took the request, and sending again cannot charge twice.
func (p *payment) resendDue(ctx workflow.Context) bool {
	if p.unknownSince.IsZero() {
		return false // no create's outcome was ever unknown: nothing to re-send
	}
	return p.state.TransactionKey == "" && len(p.keys) == 0 &&
		p.state.LastLookup != nil && p.state.LastLookup.Result == lookupNotFound &&
		workflow.Now(ctx).Sub(p.unknownSince) >= p.tuning.UnknownGrace &&
		p.state.Attempts < p.tuning.RequestAttempts
}

func (p *payment) resend(ctx workflow.Context) {
	p.log.Info("no transaction after the grace period; sending the create again", "attempts", p.state.Attempts)
	p.record(ctx, activities.KindAnomaly, "create re-sent: no transaction at the gateway after the grace period", nil)
	p.setStatus(ctx, "", status.PaymentRequested)
	p.resends++
	sent, err := p.send(ctx, fmt.Sprintf("resend-%d", p.resends))
	switch {
	case err != nil:
		p.log.Error("re-send failed", "error", err)
	case sent == sendRejected:
		p.outcome = &gateway.Transaction{OrderID: p.in.OrderID, Amount: p.in.Amount, Status: gateway.StatusFailed, Reason: p.state.Reason}
	case sent == sendUnreachable:
		// Still nothing at the gateway: keep waiting for the deadline.
		p.setStatus(ctx, "", status.PaymentUnknown)
	}
}
