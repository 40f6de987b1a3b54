package check

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/payguard/payguard/workflows"
)

// I8 holds payguard to "no order lost to a flaky or dead gateway": an order
// whose deadline window held a long enough stretch of a reachable gateway
// must not be lost. "Long enough" is LongEnough of the run's settings.

// ResendCycles is how many creates answered 5xx in a row LongEnough allows
// for, each followed by its lookup: at the chaos baseline's 5 % of creates
// answered 5xx, four in a row is one order in 160 000.
const ResendCycles = 3

// Timings are the run's settings LongEnough is made of: the workers' flags
// and the gateway's slowest decision.
type Timings struct {
	ConnectTimeout time.Duration // --connect-timeout
	ReadTimeout    time.Duration // --read-timeout
	UnknownGrace   time.Duration // --unknown-grace: after a create that timed out
	AnsweredGrace  time.Duration // --answered-grace: after a create answered 5xx, twice that after a re-send
	PollMax        time.Duration // --poll-max: the longest wait between polls
	BreakerOpen    time.Duration // the longer of --breaker-open and --request-breaker-open
	Decision       time.Duration // pgsim's --processing-max: the gateway's slowest decision
}

// term is one part of LongEnough, with what it waits for.
type term struct {
	d    time.Duration
	what string
}

func (t Timings) terms() []term {
	var resends time.Duration
	pace := workflows.Tuning{AnsweredGrace: t.AnsweredGrace}
	for i := range ResendCycles {
		resends += pace.AnsweredWait(i)
	}
	call := t.ConnectTimeout + t.ReadTimeout
	// In turn: a create that timed out as the stretch began waits out the
	// unknown grace; creates answered 5xx are each looked up after the
	// answered grace (twice it after a re-send); the calls in flight as it began time out;
	// a breaker the fault tripped refuses until its trial; the gateway
	// decides, and the worker hears by callback or its next poll.
	return []term{
		{t.UnknownGrace, "unknown grace"},
		{resends, fmt.Sprintf("%d re-send cycles", ResendCycles)},
		{2 * call, "create + lookup timeouts"},
		{t.BreakerOpen, "breaker open"},
		{t.Decision + t.PollMax, "gateway decision + poll max"},
	}
}

// LongEnough is how long a stretch of a reachable gateway within an
// order's deadline window must be for I8 to require the order not lost.
func LongEnough(t Timings) time.Duration {
	var d time.Duration
	for _, x := range t.terms() {
		d += x.d
	}
	return d
}

// Explain says what LongEnough adds up, for the report.
func (t Timings) Explain() string {
	s := ""
	for i, x := range t.terms() {
		if i > 0 {
			s += " + "
		}
		s += fmt.Sprintf("%s %s", x.d, x.what)
	}
	return fmt.Sprintf("%s = %s", LongEnough(t), s)
}

// Stretch is a span of the run when the gateway was not reachable as
// usual (the runner decides which faults cut it).
type Stretch struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Why  string    `json:"why"`
}

// longestReachable is the longest part of [from, to] no stretch covers.
func longestReachable(from, to time.Time, cut []Stretch) (time.Time, time.Time) {
	sorted := slices.SortedFunc(slices.Values(cut), func(a, b Stretch) int { return a.From.Compare(b.From) })
	bestFrom, bestTo := from, from
	at := from
	for _, c := range sorted {
		if !c.To.After(at) {
			continue
		}
		if c.From.After(at) {
			end := minTime(c.From, to)
			if end.Sub(at) > bestTo.Sub(bestFrom) {
				bestFrom, bestTo = at, end
			}
		}
		at = c.To
		if !at.Before(to) {
			return bestFrom, bestTo
		}
	}
	if to.Sub(at) > bestTo.Sub(bestFrom) {
		bestFrom, bestTo = at, to
	}
	return bestFrom, bestTo
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// I8: an order whose deadline window (placed to deadline) held a stretch
// of a reachable gateway at least LongEnough long was not lost. Checked
// are the orders with such a window (an operator's cancel aside).
func notLostWhileReachable(b Books) Result {
	r := Result{ID: "I8", Rule: fmt.Sprintf("no order lost (CANCELLED without an operator, or refunded) whose deadline window held %s of a reachable gateway", b.LongEnough)}
	if b.LongEnough <= 0 {
		return r
	}
	off := func(t time.Time) float64 { return t.Sub(b.BeganAt).Seconds() }
	for _, id := range slices.Sorted(maps.Keys(b.Outcomes)) {
		o := b.Outcomes[id]
		if o.Deadline.IsZero() || o.OperatorCancel {
			continue
		}
		from, to := longestReachable(o.PlacedAt, o.Deadline, b.Unreachable)
		if to.Sub(from) < b.LongEnough {
			continue
		}
		r.Checked++
		if o.Lost != "" {
			r.fail("order %s lost (%s: %s, payment %s): placed T+%.1fs, deadline T+%.1fs, the gateway reachable T+%.1fs to T+%.1fs (%.1fs ≥ %s)",
				id, o.Lost, o.Status, o.Payment, off(o.PlacedAt), off(o.Deadline), off(from), off(to), to.Sub(from).Seconds(), b.LongEnough)
		}
	}
	return r
}
