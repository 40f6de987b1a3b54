package breaker_test

import (
	"sync"
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

// A refusal answers at once: a call the fleet's breaker will not let
// through now — a trial under way elsewhere, or in this worker — never
// waits for the shared lease. It takes the lease's one try at most, and
// once a worker knows the lease is taken its further refusals come from
// memory, without a statement. Counted as lease statements (op "lock",
// watched), which a wait repeats until the holder gives the lease back.

// During a half-open trial on one worker, another worker's call is refused
// at once — no second trial, and no wait — and so is a second call on the
// trial's own worker.
func TestRefusedWhileATrialIsUnderWay(t *testing.T) {
	url, _ := migrated(t)
	// The leases last two seconds: a wait would outlast the trial's lease
	// and run a second trial.
	var views [2]*watched
	var fleet [2]*breaker.Breaker
	for i := range fleet {
		views[i] = &watched{}
		fleet[i] = breaker.New(activities.LookupRules(oneTrial), openStore(t, url).SharedBreakers(2*time.Second), views[i], testenv.Logger(t))
		t.Cleanup(fleet[i].Close)
	}
	a, b := fleet[0], fleet[1]
	require.ErrorIs(t, a.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	testenv.Eventually(t, 5*time.Second, func() bool {
		return a.State() == gobreaker.StateHalfOpen && b.State() == gobreaker.StateHalfOpen
	}, "both workers see the breaker half-open")

	started, release := make(chan struct{}), make(chan struct{})
	trial := make(chan error, 1)
	go func() { trial <- a.Do(func() error { close(started); <-release; return nil }) }()
	<-started
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	var trials atomic.Int32
	second := func() error { trials.Add(1); return nil }
	refuse := func(w int, what string) {
		t.Helper()
		done := make(chan error, 1)
		wg.Add(1)
		go func() { defer wg.Done(); done <- fleet[w].Do(second) }()
		err := answered(t, done, what+" is answered while the trial is under way")
		var open *breaker.OpenError
		require.ErrorAs(t, err, &open, what)
		assert.Equal(t, gobreaker.StateHalfOpen, open.State, what)
		assert.Zero(t, trials.Load(), "%s: no second trial", what)
	}

	before := views[1].locks.Load()
	refuse(1, "the other worker's call")
	assert.LessOrEqual(t, views[1].locks.Load()-before, int64(1), "the other worker tried the lease once, at most")
	before = views[1].locks.Load()
	refuse(1, "its next call")
	assert.Zero(t, views[1].locks.Load()-before, "the next refusal is answered from memory")
	before = views[0].locks.Load()
	refuse(0, "a second call on the trial's worker")
	assert.Zero(t, views[0].locks.Load()-before, "the trial's own worker refuses from memory")

	close(release)
	require.NoError(t, <-trial)
	testenv.Eventually(t, 5*time.Second, func() bool { return b.Do(func() error { return nil }) == nil }, "the trial closed the breaker for the fleet")
	assert.Zero(t, trials.Load(), "no call was let through as a trial while the first was under way")
}

// A closed breaker one failure short of tripping runs its calls one at a
// time under the lease. While another worker's such call is under way, a
// call here is refused at once instead of waiting for it.
func TestRefusedWhileAFailingGatewayIsJudged(t *testing.T) {
	url, _ := migrated(t)
	view := &watched{}
	b := breaker.New(activities.LookupRules(settings), openStore(t, url).SharedBreakers(10*time.Second), view, testenv.Logger(t))
	t.Cleanup(b.Close)
	// One failure: still closed, but the next could trip it.
	require.ErrorIs(t, b.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	require.Equal(t, gobreaker.StateClosed, b.State())

	other := openStore(t, url).BreakerHandle(time.Minute, nil)
	require.NoError(t, other.Lock(mutexKey))
	t.Cleanup(func() { _ = other.Unlock(mutexKey) })

	called := false
	done := make(chan error, 1)
	before := view.locks.Load()
	go func() { done <- b.Do(func() error { called = true; return nil }) }()
	err := answered(t, done, "the call is answered while the other worker's call is under way")
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open)
	assert.False(t, called)
	assert.LessOrEqual(t, view.locks.Load()-before, int64(1), "one try of the lease, at most")
}

// answered waits, at most 5 s, for a call's answer on done: a refusal
// comes at once, never after the lease it would otherwise wait for.
func answered(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	var err error
	testenv.Eventually(t, 5*time.Second, func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	}, what)
	return err
}
