// Package breaker holds the circuit breakers a worker calls the gateway
// through: one per process, or one for the whole fleet whose state lives in
// PostgreSQL (gobreaker v2's DistributedCircuitBreaker over store's
// BreakerHandle), so N workers detect a dead gateway once, agree on its
// state, and share one budget of half-open trials.
//
// The fleet breaker keeps three promises:
//   - a refusal answers at once: an OPEN state is answered from this
//     worker's memory until the state's own expiry, with no database round
//     trip (Do's fast path), and a call that needs the shared lease while
//     another call holds it is refused, never made to wait for it;
//   - a call that could trip the breaker, or is a half-open trial, runs
//     under the shared lease, so the fleet sends no more failing calls than
//     one breaker would, and no more trials than it lets through; a healthy
//     closed breaker's calls run freely and only their outcomes are written;
//   - a shared store that fails makes this worker fall back to its own
//     process breaker (with an ERROR log line), never to "closed": an open
//     state already seen stays open until its expiry.
package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Scopes (--breaker-scope).
const (
	ScopeFleet   = "fleet"
	ScopeProcess = "process"
)

// WatchEvery is how often a fleet breaker reads the shared state when it is
// not called: other workers' trips reach this worker's view, health and
// metrics within it.
const WatchEvery = 250 * time.Millisecond

// trialWait is the retry delay while the half-open trials are all taken,
// or the one call that may trip the breaker is under way: they end within
// one gateway call.
const trialWait = time.Second

// Observer sees what the breaker does; the worker turns it into metrics.
type Observer interface {
	// BreakerState is a change of the state as seen by this worker.
	BreakerState(name string, from, to gobreaker.State)
	// StoreCall is one statement against the shared store (op: read, lock,
	// unlock, get, set); err is nil on success.
	StoreCall(name, op string, took time.Duration, err error)
	// Fallback says this worker decides with its own breaker (on) because
	// the shared store failed, or is back on the fleet's (off).
	Fallback(name string, on bool)
}

// Handle is one DistributedCircuitBreaker's access to the shared store
// (store.BreakerHandle).
type Handle interface {
	gobreaker.SharedDataStore
	// Hold takes the lease on key, waiting up to wait for another holder
	// (0: one try), and keeps it through gobreaker's Lock and Unlock until
	// Release. ok false: another holds it, for at most left more.
	Hold(key string, wait time.Duration) (ok bool, left time.Duration, err error)
	Release(key string) error
	// Read is the state the latest GetData returned; Written the state the
	// latest operation wrote, if any.
	Read() []byte
	Written() []byte
	// ReadErr is the last read's failure, which gobreaker reports as
	// ErrNoSharedState.
	ReadErr() error
}

// Snapshot is a breaker's shared state (nil: none yet) and how long its
// lease is still held by anyone (0: free), read together.
type Snapshot struct {
	Data      []byte
	LeaseLeft time.Duration
}

// Shared is the fleet's store of breaker states.
type Shared struct {
	// NewHandle returns a handle with its own lease holder; observe sees
	// its statements.
	NewHandle func(observe func(op string, took time.Duration, err error)) Handle
	// Read reads a state and its lease by key, without taking the lease.
	Read func(stateKey, mutexKey string) (Snapshot, error)
	// Contention says an error is another holder keeping the lease longer
	// than a caller waits: busy, not an outage.
	Contention func(error) bool
}

// OpenError is a call the breaker refused: it never reached the gateway.
type OpenError struct {
	Name       string
	State      gobreaker.State
	RetryAfter time.Duration // until the breaker may let a call through
}

func (e *OpenError) Error() string {
	switch e.State {
	case gobreaker.StateHalfOpen:
		return fmt.Sprintf("breaker %s is half-open and its trial calls are taken: retry in %s", e.Name, e.RetryAfter.Round(time.Millisecond))
	case gobreaker.StateClosed:
		return fmt.Sprintf("breaker %s is one failure short of tripping and the call that may trip it is under way: retry in %s",
			e.Name, e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("breaker %s is open: retry in %s", e.Name, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is match gobreaker's own refusals.
func (e *OpenError) Is(target error) bool {
	return target == gobreaker.ErrOpenState || target == gobreaker.ErrTooManyRequests
}

// RetryDelay is when a refused call should be tried again: the time until
// the breaker may let it through, plus jitter so that the callers it refused
// do not all come back at the same instant. ok is false for other errors.
func RetryDelay(err error) (time.Duration, bool) {
	var open *OpenError
	if !errors.As(err, &open) {
		return 0, false
	}
	spread := max(open.RetryAfter/5, 200*time.Millisecond)
	return open.RetryAfter + rand.N(spread), true
}

// Rules are how a breaker counts: gobreaker's settings (their
// OnStateChange is ignored: the Observer sees the state as this worker sees
// it), and Risky, which says a fleet breaker's counts are unhealthy enough
// that the next call must be counted before another goes out: it then runs
// under the shared lease, so the fleet sends no more failing calls than one
// breaker would. Risky nil is "one more failure would trip it".
type Rules struct {
	gobreaker.Settings
	Risky func(gobreaker.Counts) bool
}

// Breaker is a gateway circuit breaker. Build it with New.
type Breaker struct {
	name     string
	settings gobreaker.Settings
	risky    func(gobreaker.Counts) bool
	shared   *Shared
	obs      Observer
	log      *slog.Logger
	local    atomic.Pointer[gobreaker.CircuitBreaker[struct{}]] // replaced by Heard

	trial    *instance   // runs the guarded calls, one at a time
	guarding atomic.Bool // a guarded call of this worker is under way

	mu        sync.Mutex
	seen      gobreaker.State  // as this worker last saw it
	counts    gobreaker.Counts // the shared counts last seen
	gen       uint64           // the shared state's generation last seen
	openUntil time.Time        // refuse without asking anyone until then
	busyUntil time.Time        // the lease is another's: refuse calls that need it until then
	degraded  bool             // the shared store failed: the local breaker decides
	free      []*instance      // record free calls' outcomes
	stop      chan struct{}
	stopOnce  sync.Once
}

type instance struct {
	dcb    *gobreaker.DistributedCircuitBreaker[struct{}] // built at its first use, under the lease
	handle Handle
}

// New builds a breaker. shared nil is the process scope. A fleet breaker
// starts a watcher; Close stops it.
func New(rules Rules, shared *Shared, obs Observer, log *slog.Logger) *Breaker {
	b := &Breaker{name: rules.Name, settings: rules.Settings, risky: rules.Risky, shared: shared, obs: obs, log: log, stop: make(chan struct{})}
	b.local.Store(b.newLocal())
	if shared != nil {
		b.trial = b.newInstance()
		b.start()
		go b.watch()
	}
	return b
}

// newLocal builds the process breaker, whose changes this worker sees while
// it decides (process scope, or a fleet breaker fallen back to it).
func (b *Breaker) newLocal() *gobreaker.CircuitBreaker[struct{}] {
	var cb *gobreaker.CircuitBreaker[struct{}]
	local := b.settings
	local.OnStateChange = func(_ string, _, to gobreaker.State) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.local.Load() == cb && (b.shared == nil || b.degraded) {
			b.see(to, time.Now().Add(b.openFor()), gobreaker.Counts{})
		}
	}
	cb = gobreaker.NewCircuitBreaker[struct{}](local)
	return cb
}

// Close stops the watcher.
func (b *Breaker) Close() { b.stopOnce.Do(func() { close(b.stop) }) }

// Name is the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Scope is ScopeFleet or ScopeProcess.
func (b *Breaker) Scope() string {
	if b.shared == nil {
		return ScopeProcess
	}
	return ScopeFleet
}

func (b *Breaker) openFor() time.Duration {
	if b.settings.Timeout <= 0 {
		return 60 * time.Second // gobreaker's default
	}
	return b.settings.Timeout
}

// State is the breaker's state as this worker sees it.
func (b *Breaker) State() gobreaker.State {
	if b.shared == nil || b.isDegraded() {
		b.local.Load().State() // moves open to half-open on time, telling see
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == gobreaker.StateOpen && !time.Now().Before(b.openUntil) {
		return gobreaker.StateHalfOpen
	}
	return b.seen
}

// Counts are the counts this worker last saw.
func (b *Breaker) Counts() gobreaker.Counts {
	if b.shared == nil || b.isDegraded() {
		return b.local.Load().Counts()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts
}

func (b *Breaker) isDegraded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.degraded
}

// Do runs req if the breaker lets it through and counts its error (by the
// settings' IsSuccessful and IsExcluded). A refusal is an *OpenError and
// req did not run.
func (b *Breaker) Do(req func() error) error {
	now := time.Now()
	if err := b.refuseFromMemory(now); err != nil {
		return err
	}
	if b.shared == nil || b.isDegraded() {
		return b.doLocal(req)
	}
	if state, guard := b.needsLease(now); guard {
		// No read first: the guarded call reads the state under the lease,
		// and one refused meanwhile is answered without a statement.
		return b.guarded(req, state)
	}
	st, err := b.readShared()
	if err != nil {
		return b.doLocal(req)
	}
	state := effective(st, now)
	switch {
	case state == gobreaker.StateOpen:
		return &OpenError{Name: b.name, State: gobreaker.StateOpen, RetryAfter: st.Expiry.Sub(now)}
	case state == gobreaker.StateClosed && !b.nearTrip(st.Counts):
		err := req()
		b.record(err, st.Generation)
		return err
	}
	if err := b.refuseFromMemory(now); err != nil { // the read saw the lease taken
		return err
	}
	return b.guarded(req, state)
}

// refuseFromMemory is the fast path: an open state seen, not yet expired;
// or a state whose calls need the shared lease while it is known to be
// another call's (this worker's own guarded call, or a holder seen lately).
func (b *Breaker) refuseFromMemory(now time.Time) error {
	b.mu.Lock()
	open := now.Before(b.openUntil)
	retry := b.openUntil.Sub(now)
	b.mu.Unlock()
	if open {
		return &OpenError{Name: b.name, State: gobreaker.StateOpen, RetryAfter: retry}
	}
	if state, guard := b.needsLease(now); guard && (b.guarding.Load() || b.busy(now)) {
		return b.busyRefusal(state)
	}
	return nil
}

// needsLease: the fleet's state as this worker last saw it lets a call
// through only under the shared lease (half-open, or closed one failure
// short of tripping); state is which.
func (b *Breaker) needsLease(now time.Time) (state gobreaker.State, guard bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared == nil || b.degraded || now.Before(b.openUntil) {
		return b.seen, false
	}
	state = b.seen
	if state == gobreaker.StateOpen {
		state = gobreaker.StateHalfOpen // past its expiry
	}
	return state, state != gobreaker.StateClosed || b.nearTrip(b.counts)
}

// busy: another holds the lease, as last seen.
func (b *Breaker) busy(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.busyUntil)
}

func (b *Breaker) doLocal(req func() error) error {
	called := false
	var reqErr error
	_, err := b.local.Load().Execute(func() (struct{}, error) {
		called = true
		reqErr = req()
		return struct{}{}, reqErr
	})
	if called {
		return reqErr
	}
	return b.refusal(err)
}

// refusal turns gobreaker's refusal into an OpenError.
func (b *Breaker) refusal(err error) error {
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &OpenError{Name: b.name, State: gobreaker.StateHalfOpen, RetryAfter: trialWait}
	}
	b.mu.Lock()
	until := b.openUntil
	b.mu.Unlock()
	return &OpenError{Name: b.name, State: gobreaker.StateOpen, RetryAfter: max(time.Until(until), 0)}
}

// nearTrip: the counts are risky (Rules.Risky), by default one more
// failure would trip the breaker.
func (b *Breaker) nearTrip(c gobreaker.Counts) bool {
	if b.risky != nil {
		return b.risky(c)
	}
	if b.settings.ReadyToTrip == nil {
		return c.ConsecutiveFailures+1 > 5 // gobreaker's default rule
	}
	c.Requests++
	c.TotalFailures++
	c.ConsecutiveFailures++
	c.ConsecutiveSuccesses = 0
	return b.settings.ReadyToTrip(c)
}

// effective is the state a shared state means now: an open state past its
// expiry is half-open (gobreaker moves it on the next call).
func effective(st gobreaker.SharedState, now time.Time) gobreaker.State {
	if st.State == gobreaker.StateOpen && !st.Expiry.After(now) {
		return gobreaker.StateHalfOpen
	}
	return st.State
}

// see records the state this worker saw (b.mu held).
func (b *Breaker) see(state gobreaker.State, openUntil time.Time, counts gobreaker.Counts) {
	// An open state is refused from memory until its expiry; any other ends
	// that: the expiry was set on the tripping worker's clock, and the fleet
	// may have moved on before ours reaches it.
	b.openUntil = time.Time{}
	if state == gobreaker.StateOpen {
		b.openUntil = openUntil
	}
	b.counts = counts
	if state == b.seen {
		return
	}
	from := b.seen
	b.seen = state
	if b.obs != nil {
		b.obs.BreakerState(b.name, from, state)
	}
	if b.log != nil {
		b.log.Warn("breaker state changed", "breaker", b.name, "from", from.String(), "to", state.String(), "scope", b.Scope())
	}
}

// seeShared takes a shared state as seen, unless it is older than one
// already seen (a read that began before a write this worker saw ended
// after it): every state change starts a new generation, fleet-wide.
func (b *Breaker) seeShared(st gobreaker.SharedState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.Generation < b.gen {
		return
	}
	b.gen = st.Generation
	b.see(effective(st, time.Now()), st.Expiry, st.Counts)
}

func decode(data []byte) (gobreaker.SharedState, error) {
	var st gobreaker.SharedState
	if len(data) == 0 {
		return st, gobreaker.ErrNoSharedState
	}
	err := json.Unmarshal(data, &st)
	return st, err
}
