package breaker_test

import (
	"encoding/json"
	"sync/atomic"
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

// The shared lease under contention, on real PostgreSQL: another worker
// holding it is "busy", never a store outage; a holder whose lease ran out
// cannot write over the state its successor wrote.

const mutexKey = "gobreaker:mutex:" + activities.LookupBreakerName

// oneTrial trips on the first failure and lets one trial through soon after.
var oneTrial = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 1, FailureRate: 0.5,
	OpenFor: 300 * time.Millisecond, HalfOpenCalls: 1}

// watched records fallbacks and lease tries besides the states.
type watched struct {
	seen
	fellBack atomic.Bool
	locks    atomic.Int64
}

func (w *watched) Fallback(_ string, on bool) {
	if on {
		w.fellBack.Store(true)
	}
}

func (w *watched) StoreCall(name, op string, took time.Duration, err error) {
	if op == "lock" {
		w.locks.Add(1)
	}
	w.seen.StoreCall(name, op, took, err)
}

// A worker that finds another holding the lease for longer than it waits
// (a trial under way elsewhere) must refuse, not take it for an outage and
// fall back to its own process breaker — which, never having seen a
// failure, is closed and would send the call as a second trial.
func TestLeaseHeldElsewhereIsBusyNotAnOutage(t *testing.T) {
	url, _ := migrated(t)
	view := &watched{}
	b := breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(time.Second), view, testenv.Logger(t))
	t.Cleanup(b.Close)
	require.ErrorIs(t, b.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	testenv.Eventually(t, 5*time.Second, func() bool { return b.State() == gobreaker.StateHalfOpen }, "the breaker half-opens")

	// Another worker's trial holds the lease (its lease is longer than ours).
	other := openStore(t, url).BreakerHandle(time.Minute, nil)
	require.NoError(t, other.Lock(mutexKey))
	t.Cleanup(func() { _ = other.Unlock(mutexKey) })

	called := false
	err := b.Do(func() error { called = true; return nil })
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open, "a busy lease refuses the call")
	assert.False(t, called, "no second trial while another is under way")
	assert.False(t, view.fellBack.Load(), "a held lease is not a store outage")
}

// A trial that outlives its lease lost it: a successor took the lease, ran
// its own trial and wrote its verdict. The late trial's outcome belongs to
// a state the fleet has left and must not overwrite that verdict.
func TestLateTrialCannotOverwriteTheSuccessorsVerdict(t *testing.T) {
	url, admin := migrated(t)
	a := breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(time.Second), &seen{}, testenv.Logger(t))
	t.Cleanup(a.Close)
	// b waits longer than a's lease lasts.
	b := breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(3*time.Second), &seen{}, testenv.Logger(t))
	t.Cleanup(b.Close)
	require.ErrorIs(t, a.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	testenv.Eventually(t, 5*time.Second, func() bool { return b.State() == gobreaker.StateHalfOpen }, "the breaker half-opens")

	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- a.Do(func() error { close(started); <-release; return nil })
	}()
	<-started
	// b is refused while a's lease lasts, then tries for itself: the
	// gateway still fails.
	bCalled := false
	var bErr error
	testenv.Eventually(t, 5*time.Second, func() bool {
		bErr = b.Do(func() error { bCalled = true; return gateway.ErrUnreachable })
		return bCalled
	}, "b gets its trial once a's lease has run out")
	require.ErrorIs(t, bErr, gateway.ErrUnreachable)
	data, err := admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	require.Equal(t, gobreaker.StateOpen, decodeState(t, data).State, "b's failed trial opened the breaker")

	close(release)
	require.NoError(t, <-done, "a's call itself succeeded")
	data, err = admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	assert.Equal(t, gobreaker.StateOpen, decodeState(t, data).State, "a's late trial, whose lease ran out, did not close the breaker")
}

// The open state's expiry is written by the worker that tripped the
// breaker, on its clock. When that clock runs ahead, the others hold an
// open state until an expiry far off, while the tripping worker's trials
// close the breaker on time. Once this worker sees the fleet's breaker
// closed, it must stop refusing from memory.
func TestClosedByTheFleetEndsTheOpenSeenInMemory(t *testing.T) {
	url, admin := migrated(t)
	b := breaker.New(activities.LookupRules(settings), openStore(t, url).SharedBreakers(2*time.Second), &seen{}, testenv.Logger(t))
	t.Cleanup(b.Close)

	other := openStore(t, url).BreakerHandle(time.Minute, nil)
	write := func(st gobreaker.SharedState) {
		t.Helper()
		require.NoError(t, other.Lock(mutexKey))
		defer func() { require.NoError(t, other.Unlock(mutexKey)) }()
		data, err := json.Marshal(st)
		require.NoError(t, err)
		require.NoError(t, other.SetData(stateKey, data))
	}
	data, err := admin.ReadBreakerState(stateKey)
	require.NoError(t, err)
	closed := decodeState(t, data) // as the breaker wrote it when built
	// Tripped by a worker whose clock is an hour ahead of ours.
	tripped := closed
	tripped.State, tripped.Generation, tripped.Expiry = gobreaker.StateOpen, closed.Generation+1, time.Now().Add(time.Hour)
	write(tripped)
	var open *breaker.OpenError
	require.ErrorAs(t, b.Do(func() error { return nil }), &open)
	// Its trials closed the breaker.
	closed.Generation, closed.Start = tripped.Generation+2, time.Now()
	write(closed)
	called := false
	testenv.Eventually(t, 5*time.Second, func() bool {
		_ = b.Do(func() error { called = true; return nil })
		return called
	}, "a call goes through once the fleet's breaker is closed")
	assert.Equal(t, gobreaker.StateClosed, b.State())
}

// A worker starting while a paused peer holds the fleet's lease (a trial
// frozen mid-call) starts without waiting for that lease to run out, and
// answers its first call at once: refused as busy, never run as a second
// trial, and never taken for a store outage.
func TestAWorkerStartsWhileAPausedPeerHoldsTheLease(t *testing.T) {
	url, admin := migrated(t)
	first := breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(time.Second), &seen{}, testenv.Logger(t))
	t.Cleanup(first.Close)
	require.ErrorIs(t, first.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	testenv.Eventually(t, 5*time.Second, func() bool { return first.State() == gobreaker.StateHalfOpen }, "the breaker half-opens")

	paused := openStore(t, url).BreakerHandle(time.Minute, nil)
	require.NoError(t, paused.Lock(mutexKey))
	t.Cleanup(func() { _ = paused.Unlock(mutexKey) })

	began := time.Now()
	view := &watched{}
	second := breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(time.Second), view, testenv.Logger(t))
	t.Cleanup(second.Close)
	called := false
	err := second.Do(func() error { called = true; return nil })
	startedIn := time.Since(began)
	var held int
	require.NoError(t, admin.Pool().QueryRow(t.Context(), `SELECT count(*) FROM breaker_leases WHERE expires_at > now()`).Scan(&held))
	assert.Equal(t, 1, held, "the new worker started and answered while the paused peer's lease still held")
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open, "its first call is refused while the peer's trial is under way")
	assert.False(t, called, "no second trial")
	assert.False(t, view.fellBack.Load(), "a held lease is not a store outage")
	t.Logf("started and answered its first call %s after the paused peer took a 1-minute lease", startedIn.Round(time.Millisecond))
}
