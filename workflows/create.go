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
// gateway provably never took it, as often as the deadline allows.

type sendResult int

const (
	sendAccepted sendResult = iota
	sendUnknown
	sendRejected
	sendUnreachable // never left: unreachable (or refused by the request breaker) until the create's budget ran out
	sendExpired     // not sent: the order's deadline passed
	sendLapsed      // not sent: the re-send's grant lapsed before the create could leave
)

// grantLife is how long a re-send's grant stands after the lookup that
// justified it: a lookup proves nothing of a gateway it looked at long ago.
// A re-send held back longer (the request breaker open) is not sent; the
// order is looked up again.
const grantLife = 5 * time.Second

// send runs the create and classifies how it ended. grant authorises a
// re-send past an unknown outcome until grantExpires ("" for the first
// send).
//
// The create's budget is counted by the activity in the database, where a
// create that timed out still counts, and Temporal retries without an
// attempt limit until the order's deadline: a dead gateway or a database
// outage before anything is sent is waited out, no create leaves after the
// deadline (the database refuses it), and every ending is one of the
// results, never an error.
func (p *payment) send(ctx workflow.Context, grant string, grantExpires time.Time) (sendResult, error) {
	left := p.state.Deadline.Sub(workflow.Now(ctx))
	if left <= 0 {
		return sendExpired, nil
	}
	in := activities.RequestInput{OrderID: p.in.OrderID, Amount: p.in.Amount, UserID: p.in.UserID, CardType: p.in.CardType,
		CardNo: p.in.CardNo, Limit: p.tuning.RequestAttempts, Grant: grant, GrantExpires: grantExpires, Deadline: p.state.Deadline}
	budget := ""
	if p.tuning.RequestAttempts > 0 {
		budget = fmt.Sprintf(" of at most %d", p.tuning.RequestAttempts)
	}
	opts := workflow.ActivityOptions{
		// The last try comes at the deadline (the activity paces its
		// retries to it) and is refused there; one already on the wire may
		// finish.
		ScheduleToCloseTimeout: left + p.tuning.RequestTimeout,
		StartToCloseTimeout:    p.tuning.RequestTimeout,
		// An operator's cancel must not leave a create on the wire behind our
		// back: wait for it to end, then compensation knows what to look for.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    activities.CreateRetry.Initial,
			BackoffCoefficient: activities.CreateRetry.Coefficient,
			MaximumInterval:    activities.CreateRetry.Max,
			// The activity already marks these non-retryable; listing them
			// again guards against a future activity that forgets.
			NonRetryableErrorTypes: createAnswers,
		},
		Summary: fmt.Sprintf("Charge %d for order %s (%s card %s, create %d%s)", p.in.Amount, p.in.OrderID,
			p.in.CardType, gateway.MaskCardNo(p.in.CardNo), p.state.Attempts+1, budget),
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
	var failure activities.RequestFailure
	if errors.As(err, &appErr) {
		if appErr.HasDetails() {
			_ = appErr.Details(&failure)
		}
		switch appErr.Type() {
		case activities.ErrDeadlinePassed:
			return sendExpired, nil
		case activities.ErrGrantExpired:
			// Nothing of this grant left (a create it let out and never
			// answered is reported unknown by the activity instead).
			return sendLapsed, nil
		}
		p.countAttempts(max(failure.Attempt, 1), failure.Attempts)
		switch appErr.Type() {
		case activities.ErrGatewayUnreachable, activities.ErrRequestBreakerOpen:
			// It never left. Temporal retries these at the breaker's pace;
			// they end here only past the create's budget.
			return sendUnreachable, nil
		case activities.ErrGatewayRejected:
			p.state.Reason = failure.Code
			if p.resends == 0 {
				p.setStatus(ctx, "", status.PaymentFailed)
			}
			return sendRejected, nil
		}
		// Any other failure may have come after the create left: the
		// outcome is unknown, never "payment failed".
	}
	return p.unknown(ctx, failure.Answered, err), nil
}

// unknown is a create whose outcome is unknown: the order is looked up
// after the grace, never re-sent blindly. answered: the gateway answered
// it in full (nothing of it is in flight).
func (p *payment) unknown(ctx workflow.Context, answered bool, err error) sendResult {
	p.maybeAtGateway = true
	p.proofDue = workflow.Now(ctx).Add(p.proofGrace(answered))
	p.listedBy = p.proofDue
	p.setStatus(ctx, status.OrderPending, status.PaymentUnknown)
	p.log.Warn("create outcome unknown; looking the order up instead of re-sending", "error", err)
	return sendUnknown
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

// proofGrace is the wait after an unknown create before the lookup that
// may justify a re-send. A create the gateway answered in full (a 5xx with
// its body) has nothing in flight: Tuning.AnsweredWait. A create that
// timed out may still be on the wire: UnknownGrace.
func (p *payment) proofGrace(answered bool) time.Duration {
	if !answered {
		return p.tuning.UnknownGrace
	}
	return p.tuning.AnsweredWait(p.resends)
}

// resendDue: a lookup by order id made once the grace after the latest
// unknown create had passed found no transaction of the order — so the
// gateway never took the request, and sending again cannot charge twice —
// and the create budget, if there is one, is not spent.
func (p *payment) resendDue() bool {
	l := p.state.LastLookup
	if p.proofDue.IsZero() || p.state.TransactionKey != "" || len(p.keys) > 0 ||
		l == nil || l.Result != lookupNotFound || l.At.Before(p.proofDue) {
		return false
	}
	return p.tuning.RequestAttempts == 0 || p.state.Attempts < p.tuning.RequestAttempts
}

// resend sends the create again under a grant that stands as long as the
// lookup behind it.
func (p *payment) resend(ctx workflow.Context) {
	p.log.Info("no transaction at the gateway after the grace period; sending the create again", "attempts", p.state.Attempts)
	p.setStatus(ctx, "", status.PaymentRequested)
	p.resends++
	sent, err := p.send(ctx, fmt.Sprintf("resend-%d", p.resends), p.state.LastLookup.At.Add(grantLife))
	switch {
	case err != nil:
		p.log.Error("re-send failed", "error", err)
	case sent == sendAccepted:
		// A FAILED answer for it is held for a search by order id (decide),
		// made once this grace has passed: the create before may have
		// made a transaction the gateway does not list yet, as after a
		// refusal below.
		p.listedBy = workflow.Now(ctx).Add(p.proofGrace(true))
	case sent == sendRejected:
		p.holdRefusal(ctx)
	case sent == sendUnreachable, sent == sendExpired, sent == sendLapsed:
		// Not sent: nothing new at the gateway. Look again after the
		// grace, until the deadline.
		p.proofDue = workflow.Now(ctx).Add(p.proofGrace(true))
		p.setStatus(ctx, "", status.PaymentUnknown)
	}
}

// holdRefusal holds a re-send's refusal like any FAILED after a re-send
// (decide): the create before may have made a transaction the lookup did
// not yet list. The search comes after the grace a re-send's own proof
// waits.
func (p *payment) holdRefusal(ctx workflow.Context) {
	p.log.Info("re-send refused; searching the order's transactions before failing it", "reason", p.state.Reason)
	p.heldFailed = &gateway.Transaction{OrderID: p.in.OrderID, Amount: p.in.Amount, Status: gateway.StatusFailed, Reason: p.state.Reason}
	p.proofDue = workflow.Now(ctx).Add(p.proofGrace(true))
	p.listedBy = p.proofDue
	p.setStatus(ctx, "", status.PaymentUnknown)
}
