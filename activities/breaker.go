package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
)

// BreakerSettings configure the lookup and create breakers (docs/design.md §6 flags).
type BreakerSettings struct {
	Window        time.Duration // the rolling window calls are counted in
	MinCalls      uint32        // no trip below this many counted calls in the window
	FailureRate   float64       // trip at or above this share of failures
	OpenFor       time.Duration // how long it stays open before trying again
	HalfOpenCalls uint32        // trial calls in half-open; all must succeed to close
	// ConsecutiveFailures also trips it at this many counted failures in a
	// row, whatever the window holds; 0 is off. The rate rule alone waits
	// for the failures to outweigh a window of successes: at 3 lookups/s
	// after a healthy 10 s window a dead gateway took ~4.7 s to trip.
	ConsecutiveFailures uint32
}

// DefaultBreakerSettings are the articles' numbers, plus three failed
// lookups in a row: a gateway gone down trips it within a second at three
// lookups a second, and a healthy gateway's lookups do not fail (pgsim's
// defaults fail none), so three in a row is an outage, not noise.
func DefaultBreakerSettings() BreakerSettings {
	return BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5, OpenFor: 10 * time.Second, HalfOpenCalls: 3,
		ConsecutiveFailures: 3}
}

// DefaultRequestBreakerSettings are the create (request) breaker's. It
// counts only creates that got no answer (CreateRules), which a healthy
// gateway does not leave: three in a row are a dead gateway, as for
// lookups, and trip it within three creates of an outage even after a
// window full of answers (the rate rule alone would wait for the failures
// to outweigh them). One successful trial closes it: a create refused by
// it waits for the trial.
func DefaultRequestBreakerSettings() BreakerSettings {
	return BreakerSettings{Window: 10 * time.Second, MinCalls: 10, FailureRate: 0.5, OpenFor: 5 * time.Second, HalfOpenCalls: 1,
		ConsecutiveFailures: 3}
}

// LogValue logs the settings with their durations as people write them
// ("5s"): slog's JSON handler would write a time.Duration in nanoseconds.
func (s BreakerSettings) LogValue() slog.Value {
	return slog.GroupValue(slog.String("window", s.Window.String()), slog.Any("min_calls", s.MinCalls),
		slog.Float64("failure_rate", s.FailureRate), slog.String("open", s.OpenFor.String()),
		slog.Any("half_open_calls", s.HalfOpenCalls), slog.Any("consecutive_failures", s.ConsecutiveFailures))
}

// refused tells the observer of a call the breaker refused, in an activity
// that began then: deferred, so that it times the activity's whole answer.
func (a *Activities) refused(endpoint string, open *breaker.OpenError, began time.Time) {
	a.observe.BreakerRefused(endpoint, open.State.String(), time.Since(began))
}

// Breaker names in logs and metrics.
const (
	LookupBreakerName = "gateway-lookup"
	CreateBreakerName = "gateway-create"
)

// NewLookupBreaker builds a process-scope lookup breaker (tests, and
// --breaker-scope process). onChange sees each state change.
func NewLookupBreaker(s BreakerSettings, onChange func(name string, from, to gobreaker.State)) *breaker.Breaker {
	return breaker.New(LookupRules(s), nil, changeFunc(onChange), nil)
}

type changeFunc func(name string, from, to gobreaker.State)

func (f changeFunc) BreakerState(name string, from, to gobreaker.State) { f(name, from, to) }
func (changeFunc) StoreCall(string, string, time.Duration, error)       {}
func (changeFunc) Fallback(string, bool)                                {}

// rules are what both breakers count by: a trip on the window's failure
// share (at least MinCalls counted) or on ConsecutiveFailures in a row.
//
// A fleet breaker's calls are risky (run one at a time under the shared
// lease) once the window holds a failure and one more could trip it by
// either rule: the window's failure share would reach the trip rate,
// whatever the count — from the first failure of a dead gateway on, in an
// empty window — or the failures in a row would reach ConsecutiveFailures.
// So the fleet sends a dead gateway one trip's worth of calls
// (--breaker-min-calls, or --breaker-consecutive-failures after a window of
// successes), not that many per worker; only calls that set out side by
// side while the next was not yet risky add to it. A window without a
// failure is never risky: a healthy gateway's calls run side by side.
func (s BreakerSettings) rules(name string) breaker.Rules {
	bucket := time.Second
	if s.Window < 10*bucket {
		bucket = s.Window / 10
	}
	return breaker.Rules{Settings: gobreaker.Settings{
		Name:         name,
		MaxRequests:  s.HalfOpenCalls,
		Interval:     s.Window,
		BucketPeriod: bucket,
		Timeout:      s.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return s.inARow(c.ConsecutiveFailures) ||
				counted >= s.MinCalls && float64(c.TotalFailures) >= s.FailureRate*float64(counted)
		},
	}, Risky: func(c gobreaker.Counts) bool {
		counted := c.TotalSuccesses + c.TotalFailures + 1
		return s.inARow(c.ConsecutiveFailures+1) ||
			c.TotalFailures > 0 && float64(c.TotalFailures+1) >= s.FailureRate*float64(counted)
	}}
}

// inARow: this many failures in a row trip the breaker.
func (s BreakerSettings) inARow(failures uint32) bool {
	return s.ConsecutiveFailures > 0 && failures >= s.ConsecutiveFailures
}

// Both breakers count what says the gateway is down: a call it never
// answered itself — it could not be reached, or it did not answer within
// the read timeout, or dropped the connection, or a proxy in front of it
// answered for it (a 5xx without the gateway's own error body, a 502 or
// 504: answeredInFull). They differ on the gateway's own 5xx.
//
// A lookup's 5xx is counted: it answers nothing, and refusing lookups
// after a run of them costs nothing they would have told (a lookup reads;
// pgsim fails none by default). A create's own 5xx is not: a complete 5xx
// body from the gateway is the gateway up and answering, and the create
// then follows its answer (a lookup by order id, then a re-send); a breaker
// that refused creates on it would turn a flaky gateway into refused
// creates and orders past their deadline, at any base rate — pgsim's
// default answers 40% of creates 500, and runs of them came by chance. A
// gateway answering every create 5xx is not hammered for it: each re-send
// waits for a lookup behind the lookup breaker, which counts 5xx, and
// re-sends back off.

// unanswered: the gateway itself never answered — not reached (connect
// error), silent once reached (read timeout, reset, EOF: no status), or
// answered for by a proxy — as opposed to an answer of its own, or a call
// that says nothing of the gateway (our own cancellation, a request the
// client refused to build).
func unanswered(err error) bool {
	var gerr *gateway.Error
	silent := errors.As(err, &gerr) && (gerr.Class == gateway.ErrOutcomeUnknown && gerr.StatusCode == 0 ||
		gerr.StatusCode >= 500 && !answeredInFull(err))
	return (errors.Is(err, gateway.ErrUnreachable) || silent) && !errors.Is(err, context.Canceled)
}

// LookupRules are the lookup breaker's rules: a failure is a lookup never
// answered, or answered 5xx (or any other answer it cannot act on).
func LookupRules(s BreakerSettings) breaker.Rules {
	st := s.rules(LookupBreakerName)
	// A 4xx is the gateway answering, healthy and definite; a cancelled
	// context and a request the client refused to build are our own
	// doing. None says anything about its health.
	st.IsExcluded = func(err error) bool {
		return errors.Is(err, gateway.ErrRejected) || errors.Is(err, context.Canceled) ||
			errors.Is(err, gateway.ErrInvalidRequest)
	}
	return st
}

// CreateRules are the create (request) breaker's rules: a create counts
// against the gateway only when the gateway itself did not answer it. Any
// answer of its own — an acceptance, a refusal, its own 5xx — is the
// gateway up, a success; a create the store did not let out (errNotSent),
// our own cancellation, or one the client refused to build says nothing of
// it and is not counted.
func CreateRules(s BreakerSettings) breaker.Rules {
	st := s.rules(CreateBreakerName)
	st.IsSuccessful = answeredBy
	st.IsExcluded = func(err error) bool { return err != nil && !unanswered(err) && !answeredBy(err) }
	return st
}

// answeredBy: the gateway itself answered the create (err is its outcome),
// whatever it said.
func answeredBy(err error) bool {
	var gerr *gateway.Error
	return err == nil || errors.As(err, &gerr) && gerr.StatusCode != 0 && !unanswered(err)
}
