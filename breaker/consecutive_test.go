package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
)

// A gateway that goes down after a window full of successful lookups: the
// failure-rate rule would wait for the failures to outweigh the successes
// (30 of them here), the consecutive-failures rule trips the fleet's
// breaker on the Nth connect failure in a row, counted across workers: one
// trip's worth of lookups reaches the dead gateway, and the call that could
// reach the threshold runs under the shared lease (one at a time across
// the fleet), the ones before it freely.
func TestFleetTripsOnConsecutiveConnectFailuresAfterAHealthyWindow(t *testing.T) {
	url, admin := migrated(t)
	sim, client, created := gatewayWithPayment(t)

	rules := settings
	rules.ConsecutiveFailures, rules.OpenFor = 3, 5*time.Second
	const workers = 3
	var fleet [workers]*breaker.Breaker
	for i := range fleet {
		fleet[i] = breaker.New(activities.LookupRules(rules), openStore(t, url).SharedBreakers(2*time.Second), &seen{}, testenv.Logger(t))
		t.Cleanup(fleet[i].Close)
	}

	// Each call notes whether it runs under the lookup breaker's lease.
	var guarded []bool
	lookup := func() error {
		var held bool
		require.NoError(t, admin.Pool().QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM breaker_leases WHERE key = $1 AND expires_at > now())`,
			mutexKey).Scan(&held))
		guarded = append(guarded, held)
		_, err := client.Payment(context.Background(), created.TransactionKey)
		return err
	}
	// The workers take turns, one call at a time: the count is exact.
	const healthy = 30
	for i := range healthy {
		require.NoError(t, fleet[i%workers].Do(lookup))
	}
	data, err := admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	require.EqualValues(t, healthy, decodeState(t, data).Counts.TotalSuccesses, "the window holds the fleet's successes")

	testenv.PatchFaults(t, sim, map[string]any{"down": true})
	guarded = nil
	var refused *breaker.OpenError
	for i := 0; i < 10 && refused == nil; i++ {
		err := fleet[i%workers].Do(lookup)
		var r *breaker.OpenError
		switch {
		case errors.As(err, &r) && r.State == gobreaker.StateOpen:
			refused = r
		case errors.As(err, &r):
			// The lease seen held a moment ago (another worker's guarded
			// call, read by a watcher): refused without a call, tried again.
		default:
			require.ErrorIs(t, err, gateway.ErrUnreachable, "call %d: a connect failure", i)
		}
	}
	require.NotNil(t, refused, "the breaker opened")
	assert.Equal(t, gobreaker.StateOpen, refused.State)
	assert.Equal(t, []bool{false, false, true}, guarded,
		"three connect failures in a row, one per worker, reached the dead gateway; the third, which could trip it, under the lease")
	testenv.Eventually(t, time.Second, func() bool {
		for _, b := range fleet {
			if b.State() != gobreaker.StateOpen {
				return false
			}
		}
		return true
	}, "every worker sees the breaker open within a second")
	data, err = admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	assert.Equal(t, gobreaker.StateOpen, decodeState(t, data).State, "the fleet's stored state")
	rateOnly := activities.LookupRules(settings) // no consecutive-failures rule
	assert.False(t, rateOnly.ReadyToTrip(gobreaker.Counts{Requests: healthy + 3, TotalSuccesses: healthy, TotalFailures: 3, ConsecutiveFailures: 3}),
		"the failure-rate rule alone would not have tripped")
}
