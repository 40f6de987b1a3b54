package activities_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// The create (request) breaker with its default settings, in the fleet
// scope (shared through the test's database), in front of a real pgsim:
// it trips on a dead gateway, not on a flaky one.

// changes records a breaker's state changes.
type changes struct {
	noView
	seen []string
}

func (c *changes) BreakerState(_ string, _, to gobreaker.State) { c.seen = append(c.seen, to.String()) }

// createsThrough is a rig whose creates go through a fleet create breaker
// with the default settings.
func createsThrough(t *testing.T, faults simulator.Faults) (*rig, *activities.Activities, *breaker.Breaker, *changes) {
	t.Helper()
	r := newRig(t, faults, activities.DefaultBreakerSettings(), false)
	view := &changes{}
	creates := breaker.New(activities.CreateRules(activities.DefaultRequestBreakerSettings()), r.store.SharedBreakers(2*time.Second), view, testenv.Logger(t))
	t.Cleanup(creates.Close)
	acts := activities.New(r.store, r.client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway", Creates: creates}, observer{r})
	r.env.RegisterActivity(acts)
	_, err := r.store.SetStock(t.Context(), "P1", 1000)
	require.NoError(t, err)
	return r, acts, creates, view
}

// createsCalled counts the creates the client sent, whatever their outcome.
func (r *rig) createsCalled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, v := range r.calls {
		if strings.HasPrefix(k, "create/") && !strings.HasPrefix(k, "create/refused/") && k != "create/"+activities.OutcomeBreakerOpen {
			n += v
		}
	}
	return n
}

// A gateway answering most creates 5xx — pgsim's default 40%, and chaos's
// 60% — is up: every create reaches it and the breaker never leaves
// closed.
func TestAFlakyGatewayDoesNotTripTheCreateBreaker(t *testing.T) {
	for _, rate := range []float64{0.4, 0.6} {
		t.Run(fmt.Sprintf("%.0f%% 5xx", rate*100), func(t *testing.T) {
			f := quiet()
			f.Create.ErrorRate = rate
			r, acts, creates, view := createsThrough(t, f)
			const orders = 40
			for i := range orders {
				id := fmt.Sprintf("order-%d", i)
				r.reserve(t, id)
				_, _ = r.env.ExecuteActivity(acts.RequestPayment, request(id))
			}
			assert.Empty(t, view.seen, "the breaker's state changes")
			assert.Equal(t, gobreaker.StateClosed, creates.State())
			assert.Equal(t, orders, r.sim.Stats().Requests["create"], "every create reached the gateway")
			assert.Greater(t, r.calls["create/unknown"], orders/5, "answered 5xx, often")
		})
	}
}

// A dead gateway trips it within three creates, after a window full of
// answered ones: one it cannot reach, one that reaches it and never
// answers (held past the read timeout), or one a proxy answers for (502).
func TestADeadGatewayTripsTheCreateBreaker(t *testing.T) {
	for _, c := range []struct {
		name string
		dead map[string]any
	}{
		{"unreachable", map[string]any{"down": true}},
		{"silent", map[string]any{"create": map[string]any{"errorRate": 0, "timeoutRate": 1, "timeoutDelay": "5s"}}},
		{"answered for by a proxy", map[string]any{"create": map[string]any{"errorRate": 1, "errorStatus": 502}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := quiet()
			f.Create.ErrorRate = 0.4
			r, acts, creates, _ := createsThrough(t, f)
			for i := range 20 {
				id := fmt.Sprintf("healthy-%d", i)
				r.reserve(t, id)
				_, _ = r.env.ExecuteActivity(acts.RequestPayment, request(id))
			}
			require.Equal(t, gobreaker.StateClosed, creates.State(), "closed after a window of answers")

			testenv.PatchFaults(t, r.sim, c.dead)
			// A create refused without a call (the lease of the call that
			// may trip it still seen held, for up to the breaker's memo of
			// it) is tried again after the delay it names, as the
			// activity's retry would; only creates sent to the gateway count.
			sent := r.createsCalled()
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; r.createsCalled()-sent < 3; i++ {
				require.True(t, time.Now().Before(deadline), "%d creates sent to the dead gateway in 30 s", r.createsCalled()-sent)
				id := fmt.Sprintf("dead-%d", i)
				r.reserve(t, id)
				before := r.createsCalled()
				_, err := r.env.ExecuteActivity(acts.RequestPayment, request(id))
				var refused *temporal.ApplicationError
				if r.createsCalled() == before && errors.As(err, &refused) && refused.NextRetryDelay() > 0 {
					time.Sleep(refused.NextRetryDelay()) // the retry's own schedule, not a wait for a condition
				}
			}
			require.Equal(t, 3, r.createsCalled()-sent, "creates sent to the dead gateway")
			assert.Equal(t, gobreaker.StateOpen, creates.State(), "open after three creates without an answer")
		})
	}
}

// What the create breaker counts, by the gateway client's errors: the
// gateway's own answers are successes, what it never answered itself is a
// failure, and what says nothing of it is not counted.
func TestCreateRulesCountWhatTheGatewayNeverAnswered(t *testing.T) {
	rules := activities.CreateRules(activities.DefaultRequestBreakerSettings())
	unknown := func(status int, code string, err error) error {
		return &gateway.Error{Class: gateway.ErrOutcomeUnknown, Op: "create", StatusCode: status, Code: code, Err: err}
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"accepted", nil, "success"},
		{"refused (4xx)", &gateway.Error{Class: gateway.ErrRejected, StatusCode: 402, Code: "LIMIT_EXCEEDED"}, "success"},
		{"rate limited (429)", &gateway.Error{Class: gateway.ErrRejected, StatusCode: 429, Code: "TOO_MANY"}, "success"},
		{"the gateway's own 500", unknown(500, "INTERNAL_ERROR", nil), "success"},
		{"the gateway's own 503", unknown(503, "INTERNAL_ERROR", nil), "success"},
		{"connect refused", &gateway.Error{Class: gateway.ErrUnreachable, Err: errors.New("connection refused")}, "failure"},
		{"read timeout", unknown(0, "", errors.New("timeout awaiting response headers")), "failure"},
		{"a proxy's 502", unknown(502, "", nil), "failure"},
		{"a proxy's 504", unknown(504, "TIMEOUT", nil), "failure"},
		{"a 5xx without the gateway's body", unknown(500, "", nil), "failure"},
		{"a 5xx whose body broke off", unknown(500, "INTERNAL_ERROR", errors.New("read answer: EOF")), "failure"},
		{"our own cancel", unknown(0, "", context.Canceled), "excluded"},
		{"never built", &gateway.Error{Class: gateway.ErrInvalidRequest}, "excluded"},
		{"not sent by the store", errors.New("create not sent"), "excluded"},
	} {
		got := "failure"
		switch {
		case rules.IsExcluded(c.err):
			got = "excluded"
		case rules.IsSuccessful(c.err):
			got = "success"
		}
		assert.Equal(t, c.want, got, c.name)
	}
}

// A create the gateway answers itself — accepted, or its own 500 — is word
// that it is up: the lookup breaker, open for a minute on lookups that
// failed, no longer refuses (breaker.Heard); a create it never answered
// leaves it open.
func TestAnAnsweredCreateEndsTheOpenLookupBreaker(t *testing.T) {
	for _, c := range []struct {
		name     string
		create   map[string]any
		down     bool
		wantOpen bool
	}{
		{name: "accepted", create: map[string]any{"errorRate": 0}},
		{name: "answered 500", create: map[string]any{"errorRate": 1}},
		{name: "unreachable", down: true, wantOpen: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules := activities.DefaultBreakerSettings()
			rules.OpenFor = time.Minute
			r := newRig(t, quiet(), rules, false)
			testenv.PatchFaults(t, r.sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
			for range rules.ConsecutiveFailures {
				_, _ = r.env.ExecuteActivity(r.acts.LookupPayment, activities.LookupInput{OrderID: "order-0"})
			}
			require.Equal(t, gobreaker.StateOpen, r.breaker.State())

			r.reserve(t, "order-1")
			if c.down {
				testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
			} else {
				testenv.PatchFaults(t, r.sim, map[string]any{"create": c.create})
			}
			_, _ = r.env.ExecuteActivity(r.acts.RequestPayment, request("order-1"))
			assert.Equal(t, c.wantOpen, r.breaker.State() == gobreaker.StateOpen, "lookup breaker %s", r.breaker.State())
		})
	}
}

// Creates that cannot reach the gateway count against the lookup breaker
// as lookups that could not would (breaker.Missed): an outage trips it on
// the traffic of both kinds, before any lookup has failed.
func TestUnreachableCreatesTripTheLookupBreaker(t *testing.T) {
	rules := activities.DefaultBreakerSettings()
	r := newRig(t, quiet(), rules, false)
	_, err := r.store.SetStock(t.Context(), "P1", 100)
	require.NoError(t, err)
	testenv.PatchFaults(t, r.sim, map[string]any{"down": true})
	for i := range rules.ConsecutiveFailures {
		id := fmt.Sprintf("order-%d", i)
		r.reserve(t, id)
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request(id))
		kind, _ := appError(t, err)
		require.Equal(t, activities.ErrGatewayUnreachable, kind)
	}
	assert.Equal(t, gobreaker.StateOpen, r.breaker.State())
	assert.Zero(t, r.sim.Stats().Requests["lookup"]+r.sim.Stats().Requests["lookup-by-order"], "no lookup was made")
}
