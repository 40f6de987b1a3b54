// Package outage reproduces the first article's experiment on payguard: a
// steady stream of orders while the gateway goes down and comes back, with
// the lookup breaker's life (CLOSED → OPEN → HALF_OPEN → CLOSED) timed, the
// latencies compared, and the money checked (no order charged twice, stock
// conserved). `make demo` runs it on a real local stack; the end-to-end
// tests run a shortened one.
package outage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
)

// Scenario is one outage run.
type Scenario struct {
	Load       loadgen.Config
	DownAt     time.Duration // gateway taken down this long after the first order
	UpAt       time.Duration // and brought back here
	AdminURL   string        // pgsim's admin API
	MetricsURL string        // the worker's /metrics
	// FleetMetricsURLs are the other workers' (--workers N).
	FleetMetricsURLs []string
	// Say prints a line as things happen (outage, breaker changes).
	Say func(format string, args ...any)
	// OnBegin, when set, runs at time zero, before the first order: a load
	// client that paces itself (--via vegeta) starts here.
	OnBegin func(began time.Time) error
}

// GatewayEvent is the outage as the scenario caused it.
type GatewayEvent struct {
	Offset float64 `json:"offsetSeconds"`
	Down   bool    `json:"down"`
}

// Run launches the load, causes the outage and returns the load's summary
// with the gateway's own statistics.
func (s Scenario) Run(ctx context.Context, cl client.Client, progress io.Writer) (loadgen.Summary, []GatewayEvent, simulator.Stats, error) {
	if s.Say == nil {
		s.Say = func(string, ...any) {}
	}
	if err := s.Load.Validate(); err != nil {
		return loadgen.Summary{}, nil, simulator.Stats{}, err
	}
	if !(0 < s.DownAt && s.DownAt < s.UpAt) {
		return loadgen.Summary{}, nil, simulator.Stats{}, fmt.Errorf("want 0 < down-at < up-at, got %s and %s", s.DownAt, s.UpAt)
	}
	var events []GatewayEvent
	began := time.Now()
	if s.OnBegin != nil {
		if err := s.OnBegin(began); err != nil {
			return loadgen.Summary{}, nil, simulator.Stats{}, err
		}
	}
	outageDone := make(chan error, 1)
	outageCtx, stopOutage := context.WithCancel(ctx)
	defer stopOutage()
	go func() {
		for _, step := range []struct {
			at   time.Duration
			down bool
		}{{s.DownAt, true}, {s.UpAt, false}} {
			select {
			case <-outageCtx.Done():
				outageDone <- nil
				return
			case <-time.After(time.Until(began.Add(step.at))):
			}
			if err := patchDown(outageCtx, s.AdminURL, step.down); err != nil {
				outageDone <- err
				return
			}
			events = append(events, GatewayEvent{Offset: time.Since(began).Seconds(), Down: step.down})
			if step.down {
				s.Say("T+%5.1fs  gateway DOWN (pgsim closes its port)", time.Since(began).Seconds())
			} else {
				s.Say("T+%5.1fs  gateway UP again", time.Since(began).Seconds())
			}
		}
		outageDone <- nil
	}()
	load := s.Load
	load.MetricsURL, load.FleetMetricsURLs = s.MetricsURL, s.FleetMetricsURLs
	load.OnBreakerChange = func(c loadgen.BreakerChange) {
		s.Say("T+%5.1fs  breaker %s -> %s  (%s)", c.Offset, strings.ToUpper(c.From), strings.ToUpper(c.To), c.Where())
	}
	load.BeganAt = began
	summary := loadgen.Run(ctx, cl, load, progress)
	stopOutage()
	if err := <-outageDone; err != nil {
		return summary, events, simulator.Stats{}, err
	}
	// Whatever happened, leave the gateway up.
	_ = patchDown(context.Background(), s.AdminURL, false)
	stats, err := gatewayStats(ctx, s.AdminURL)
	return summary, events, stats, err
}

func patchDown(ctx context.Context, adminURL string, down bool) error {
	if err := simulator.PatchFaults(ctx, adminURL, map[string]any{"down": down}); err != nil {
		return fmt.Errorf("pgsim admin: %w", err)
	}
	return nil
}

func gatewayStats(ctx context.Context, adminURL string) (simulator.Stats, error) {
	var stats simulator.Stats
	err := simulator.AdminCall(ctx, http.MethodGet, adminURL, "/admin/stats", nil, &stats)
	return stats, err
}
