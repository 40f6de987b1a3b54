package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// cancelTakes: an operator's cancel ends the wait, but not once an answer
// is in hand. A local Settle commits inside the task that received the
// answer, before that task completes; a task that does not complete (the
// server will not close a workflow while a cancel request waits; a worker
// dies) runs again from its history, where the cancel may now come with the
// answer, and must decide as the first run did: settle, never compensate
// (that would refund a charge already CONFIRMED, then fail on CONFIRMED ->
// CANCELLED). So, too, poll reads a result that comes back with a cancel,
// and run goes on to await after a create the gateway answered.
func (p *payment) cancelTakes(ctx workflow.Context) bool {
	return ctx.Err() != nil && p.outcome == nil
}

type awaitEnd int

const (
	endOutcome awaitEnd = iota
	endDeadline
	endCancelled
)

// await waits for the first definitive answer, polling with backoff. It
// keeps one timer: the next poll, brought forward to the deadline when that
// comes first. A timer costs the server a task to write and one to cancel
// for every order a callback answers.
func (p *payment) await(ctx workflow.Context) awaitEnd {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer func() { cancelTimer() }()
	delay := p.tuning.PollInitial
	poll, pollAt := p.pollTimer(timerCtx, p.pollIn(ctx, delay))
	for p.outcome == nil {
		pollDue := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(p.callbacks, func(workflow.ReceiveChannel, bool) { p.drainCallbacks(ctx) })
		sel.AddReceive(p.hints, func(c workflow.ReceiveChannel, _ bool) { p.onHint(ctx, c) })
		sel.AddFuture(poll, func(workflow.Future) { pollDue = true })
		sel.Select(ctx)
		switch {
		case p.cancelTakes(ctx):
			return endCancelled
		case p.outcome != nil:
		case !workflow.Now(ctx).Before(p.state.Deadline):
			// The selector takes the first ready case in the order added: a
			// stream of signals (forged hints) arriving faster than their
			// lookups end would otherwise never let the deadline be picked.
			return endDeadline
		case pollDue:
			p.hintLooked = false
			p.poll(ctx, "")
			if p.outcome == nil && ctx.Err() == nil && p.resendDue() {
				p.resend(ctx)
			}
			if p.cancelTakes(ctx) {
				return endCancelled
			}
			delay = min(delay*2, p.tuning.PollMax)
			poll, pollAt = p.pollTimer(timerCtx, p.pollIn(ctx, p.nextPoll(delay)))
		case p.retryAfter > 0 || p.heldFailed != nil:
			// A signal's lookup was refused by the open breaker, or left a
			// FAILED held for a search: the poll it needs comes when the
			// breaker lets lookups through (or at the first backoff), not
			// on the backoff set before the signal — up to PollMax away.
			if d := p.pollIn(ctx, p.nextPoll(p.tuning.PollInitial)); workflow.Now(ctx).Add(d).Before(pollAt) {
				cancelTimer()
				timerCtx, cancelTimer = workflow.WithCancel(ctx)
				poll, pollAt = p.pollTimer(timerCtx, d)
			}
		}
	}
	return endOutcome
}

// pollTimer starts the timer of the next poll, due after d, or at the
// deadline when that comes first, and says when it fires.
func (p *payment) pollTimer(ctx workflow.Context, d time.Duration) (workflow.Future, time.Time) {
	now := workflow.Now(ctx)
	if left := max(p.state.Deadline.Sub(now), 0); left <= d {
		return workflow.NewTimerWithOptions(ctx, left, workflow.TimerOptions{Summary: "order deadline"}), now.Add(left)
	}
	return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "next status poll (the deadline is later)"}), now.Add(d)
}

// pollIn brings the next poll, due in d, forward while the order waits for
// the lookup that may justify a re-send: to proofDue, or, once that has
// passed without a lookup that answered (the gateway unreachable), at the
// re-send's pace rather than the regular backoff. An open lookup breaker
// keeps its own time (nextPoll). A FAILED held for a search (decide) is
// searched once the latest create's grace (listedBy) has passed.
func (p *payment) pollIn(ctx workflow.Context, d time.Duration) time.Duration {
	if due := p.listedBy.Sub(workflow.Now(ctx)); p.heldFailed != nil && due > 0 {
		d = min(d, due) // a FAILED held until the latest create's grace has passed (decide)
	}
	if p.proofDue.IsZero() || len(p.keys) > 0 || p.state.TransactionKey != "" {
		return d
	}
	if due := p.proofDue.Sub(workflow.Now(ctx)); due > 0 {
		return min(d, due)
	}
	if p.retryAfter > 0 {
		return d
	}
	return min(d, p.proofGrace(true))
}

// nextPoll is the delay to the next regular poll. After an open lookup
// breaker it comes when the breaker may let a lookup through (the
// activity's Unavailable.RetryAfter, jitter included) instead of on the
// backoff: earlier would only be refused again, later would leave the order
// waiting after the gateway is back. PollMax still bounds it.
func (p *payment) nextPoll(backoff time.Duration) time.Duration {
	if p.retryAfter <= 0 {
		return backoff
	}
	return min(p.retryAfter, p.tuning.PollMax)
}
