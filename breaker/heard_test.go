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
	"github.com/payguard/payguard/internal/testenv"
)

// trip opens b on the dead gateway sim stands for, one lookup at a time.
func trip(t *testing.T, b *breaker.Breaker, lookup func() error) {
	t.Helper()
	for i := 0; i < 10; i++ {
		var open *breaker.OpenError
		if err := b.Do(lookup); errors.As(err, &open) {
			return
		}
	}
	require.Fail(t, "the breaker never opened")
}

// A gateway that answers again early in the lookup breaker's open period:
// word of it from a create (Heard) ends the open state at once, on every
// worker of the fleet, so the next lookups are the half-open trials rather
// than refusals for the rest of --breaker-open; their successes close it.
// Heard never closes it by itself.
func TestHeardFromTheGatewayEndsTheFleetsOpenState(t *testing.T) {
	url, admin := migrated(t)
	sim, client, created := gatewayWithPayment(t)
	rules := settings
	rules.ConsecutiveFailures, rules.OpenFor = 3, time.Minute
	var fleet [2]*breaker.Breaker
	for i := range fleet {
		fleet[i] = breaker.New(activities.LookupRules(rules), openStore(t, url).SharedBreakers(2*time.Second), &seen{}, testenv.Logger(t))
		t.Cleanup(fleet[i].Close)
	}
	lookup := func() error {
		_, err := client.Payment(context.Background(), created.TransactionKey)
		return err
	}

	testenv.PatchFaults(t, sim, map[string]any{"down": true})
	trip(t, fleet[0], lookup)
	testenv.Eventually(t, time.Second, func() bool { return fleet[1].State() == gobreaker.StateOpen }, "the other worker sees it open")
	testenv.PatchFaults(t, sim, map[string]any{"down": false})
	var open *breaker.OpenError
	require.ErrorAs(t, fleet[1].Do(lookup), &open, "open for a minute: refused though the gateway is back")

	fleet[1].Heard()
	assert.Equal(t, gobreaker.StateHalfOpen, fleet[1].State(), "the worker that heard it")
	data, err := admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	st := decodeState(t, data)
	assert.Equal(t, gobreaker.StateOpen, st.State, "still open in the store, its expiry passed")
	assert.False(t, st.Expiry.After(time.Now()), "expiry %s", st.Expiry)
	testenv.Eventually(t, time.Second, func() bool { return fleet[0].State() == gobreaker.StateHalfOpen },
		"the worker that tripped it sees it half-open within its watch")

	// A trial may be refused while the lease is seen taken (Heard's own
	// write, read by a watcher): the next try gets through.
	trials := 0
	testenv.Eventually(t, 5*time.Second, func() bool {
		err := fleet[trials%2].Do(lookup)
		var busy *breaker.OpenError
		if errors.As(err, &busy) {
			require.NotEqual(t, gobreaker.StateOpen, busy.State, "refused as open: %v", err)
			return false
		}
		require.NoError(t, err, "trial %d", trials)
		trials++
		return trials == int(rules.HalfOpenCalls)
	}, "the half-open trials")
	testenv.Eventually(t, time.Second, func() bool {
		return fleet[0].State() == gobreaker.StateClosed && fleet[1].State() == gobreaker.StateClosed
	}, "the trials closed it for both")

	fleet[0].Heard() // closed: left alone
	data, err = admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	assert.Equal(t, gobreaker.StateClosed, decodeState(t, data).State)
}

// The process breaker has no half-open to be moved into: Heard starts it
// again closed, and a gateway still down for lookups trips it again on
// --breaker-consecutive-failures.
func TestHeardFromTheGatewayEndsTheProcessBreakersOpenState(t *testing.T) {
	sim, client, created := gatewayWithPayment(t)
	rules := settings
	rules.ConsecutiveFailures, rules.OpenFor = 3, time.Minute
	b := activities.NewLookupBreaker(rules, func(string, gobreaker.State, gobreaker.State) {})
	lookup := func() error {
		_, err := client.Payment(context.Background(), created.TransactionKey)
		return err
	}
	b.Heard() // closed: left alone
	assert.Equal(t, gobreaker.StateClosed, b.State())

	testenv.PatchFaults(t, sim, map[string]any{"down": true})
	trip(t, b, lookup)
	b.Heard()
	assert.Equal(t, gobreaker.StateClosed, b.State(), "heard: closed again")
	trip(t, b, lookup)
	assert.Equal(t, gobreaker.StateOpen, b.State(), "still down for lookups: open again")
	assert.EqualValues(t, 0, b.Counts().TotalSuccesses)

	testenv.PatchFaults(t, sim, map[string]any{"down": false})
	b.Heard()
	require.NoError(t, b.Do(lookup))
	assert.EqualValues(t, 1, b.Counts().TotalSuccesses, "the new breaker counts")
}
