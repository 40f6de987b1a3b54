package activities

import (
	"context"
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/payguard/payguard/gateway"
)

// BreakerSettings configure the lookup breaker (docs/design.md §6 flags).
type BreakerSettings struct {
	Window        time.Duration // the rolling window calls are counted in
	MinCalls      uint32        // no trip below this many counted calls in the window
	FailureRate   float64       // trip at or above this share of failures
	OpenFor       time.Duration // how long it stays open before trying again
	HalfOpenCalls uint32        // trial calls in half-open; all must succeed to close
}

// DefaultBreakerSettings are the articles' numbers.
func DefaultBreakerSettings() BreakerSettings {
	return BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5, OpenFor: 10 * time.Second, HalfOpenCalls: 3}
}

// LookupBreakerName names the lookup breaker in logs and metrics.
const LookupBreakerName = "gateway-lookup"

// NewLookupBreaker builds the breaker every lookup of this worker process
// goes through. onChange sees each state change (logs, metrics).
func NewLookupBreaker(s BreakerSettings, onChange func(name string, from, to gobreaker.State)) *gobreaker.CircuitBreaker[LookupResult] {
	bucket := time.Second
	if s.Window < 10*bucket {
		bucket = s.Window / 10
	}
	return gobreaker.NewCircuitBreaker[LookupResult](gobreaker.Settings{
		Name:         LookupBreakerName,
		MaxRequests:  s.HalfOpenCalls,
		Interval:     s.Window,
		BucketPeriod: bucket,
		Timeout:      s.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return counted >= s.MinCalls && float64(c.TotalFailures) >= s.FailureRate*float64(counted)
		},
		OnStateChange: onChange,
		// A 4xx is the gateway answering, healthy and definite; a cancelled
		// context and a request the client refused to build are our own
		// doing. None says anything about its health.
		IsExcluded: func(err error) bool {
			return errors.Is(err, gateway.ErrRejected) || errors.Is(err, context.Canceled) ||
				errors.Is(err, gateway.ErrInvalidRequest)
		},
	})
}
