package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// The fleet scope: gobreaker's DistributedCircuitBreaker instances over the
// shared store, each used by one call at a time (a store handle holds its
// own lease), kept in a free list.

// errShared marks a failure of the shared store (not a refusal, not the
// call's own error).
type errShared struct{ err error }

func (e errShared) Error() string { return "shared breaker store: " + e.err.Error() }
func (e errShared) Unwrap() error { return e.err }

// newInstance builds one DistributedCircuitBreaker. It takes the shared
// lease, which may mean waiting for another worker: never with b.mu held,
// or every call of this worker (the open fast path too, and a holder
// finishing its call, which needs b.mu to record what it saw) would wait.
func (b *Breaker) newInstance() (*instance, error) {
	h := b.shared.NewHandle(func(op string, took time.Duration, err error) {
		if b.obs != nil {
			b.obs.StoreCall(b.name, op, took, err)
		}
	})
	settings := b.settings
	settings.OnStateChange = nil
	dcb, err := newDistributed(h, settings)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.stateKey = h.StateKey()
	b.mu.Unlock()
	return &instance{dcb: dcb, handle: h}, nil
}

// newDistributed is gobreaker.NewDistributedCircuitBreaker, which (v2.4.0)
// panics when it fails after taking the lock: it returns a nil breaker and
// its deferred unlock calls through it. The panic becomes the error, and
// the lease is given back here instead.
func newDistributed(h Handle, settings gobreaker.Settings) (dcb *gobreaker.DistributedCircuitBreaker[struct{}], err error) {
	defer func() {
		if r := recover(); r != nil {
			_ = h.Unlock("gobreaker:mutex:" + settings.Name)
			dcb = nil
			if err = h.ReadErr(); err == nil {
				err = fmt.Errorf("build the shared breaker: %v", r)
			}
		}
	}()
	return gobreaker.NewDistributedCircuitBreaker[struct{}](h, settings)
}

func (b *Breaker) checkout() (*instance, error) {
	b.mu.Lock()
	if n := len(b.free); n > 0 {
		in := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return in, nil
	}
	b.mu.Unlock()
	return b.newInstance()
}

func (b *Breaker) checkin(in *instance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free = append(b.free, in)
}

// readShared reads the fleet's state without a lease and takes it as seen.
// A failure degrades this worker to its local breaker.
func (b *Breaker) readShared() (gobreaker.SharedState, error) {
	b.mu.Lock()
	key := b.stateKey
	b.mu.Unlock()
	if key == "" { // no instance could be built yet
		in, err := b.checkout()
		if err != nil {
			b.degradeLocked(err)
			return gobreaker.SharedState{}, err
		}
		b.checkin(in)
		b.mu.Lock()
		key = b.stateKey
		b.mu.Unlock()
	}
	start := time.Now()
	data, err := b.shared.Read(key)
	if b.obs != nil {
		b.obs.StoreCall(b.name, "read", time.Since(start), err)
	}
	var st gobreaker.SharedState
	if err == nil {
		st, err = decode(data)
	}
	if err != nil {
		b.degradeLocked(err)
		return st, err
	}
	b.recovered()
	b.seeShared(st)
	return st, nil
}

// record writes a call's outcome into the shared state. A call that ran
// outside the lease can find the state moved on (opened meanwhile): its
// outcome then counts for nothing, as gobreaker does with a call of an
// older generation.
func (b *Breaker) record(outcome error) {
	_, err := b.execute(func() error { return outcome })
	var shared errShared
	if errors.As(err, &shared) && !b.contended(shared.err) {
		b.degradeLocked(shared.err)
	}
}

// contended: the shared store answered, but another holder has the lease
// (or took over ours): busy, not an outage.
func (b *Breaker) contended(err error) bool {
	return b.shared.Contention != nil && b.shared.Contention(err)
}

// guarded runs req under the shared lease: a half-open trial or a call that
// may trip the breaker.
func (b *Breaker) guarded(req func() error) error {
	var reqErr error
	called, err := b.execute(func() error {
		reqErr = req()
		return reqErr
	})
	if called {
		return reqErr
	}
	var shared errShared
	if errors.As(err, &shared) {
		if !b.contended(shared.err) {
			b.degradeLocked(shared.err)
			return b.doLocal(req)
		}
		// Others hold the lease for longer than ours lasts: trials are
		// under way elsewhere.
		return &OpenError{Name: b.name, State: gobreaker.StateHalfOpen, RetryAfter: trialWait}
	}
	return b.refusal(err)
}

// execute runs req through one DistributedCircuitBreaker and takes the
// state it wrote as seen. called says whether req ran; err is req's error,
// gobreaker's refusal, or an errShared.
func (b *Breaker) execute(req func() error) (called bool, err error) {
	in, err := b.checkout()
	if err != nil {
		return false, errShared{err}
	}
	defer b.checkin(in)
	var reqErr error
	_, err = in.dcb.Execute(func() (struct{}, error) {
		called = true
		reqErr = req()
		return struct{}{}, reqErr
	})
	if data := in.handle.Written(); len(data) > 0 {
		if st, derr := decode(data); derr == nil {
			b.seeShared(st)
		}
	}
	switch {
	case err == nil, called && err == reqErr:
		return called, reqErr
	case !called && (errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)):
		return false, err
	case errors.Is(err, gobreaker.ErrNoSharedState) && in.handle.ReadErr() != nil:
		// The read failed (a lease held elsewhere, an outage): say which.
		err = in.handle.ReadErr()
	}
	return called, errShared{err}
}

// degradeLocked falls back to the local breaker, saying so once.
func (b *Breaker) degradeLocked(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.degrade(err)
}

// degrade (b.mu held).
func (b *Breaker) degrade(err error) {
	if b.degraded {
		return
	}
	b.degraded = true
	if b.obs != nil {
		b.obs.Fallback(b.name, true)
	}
	if b.log != nil {
		b.log.Error("shared breaker store failed: this worker falls back to its own process breaker until the store answers again; an open state already seen stays open",
			"breaker", b.name, "error", err.Error(), "open_until", b.openUntil)
	}
}

func (b *Breaker) recovered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.degraded {
		return
	}
	b.degraded = false
	if b.obs != nil {
		b.obs.Fallback(b.name, false)
	}
	if b.log != nil {
		b.log.Warn("shared breaker store answers again: back to the fleet's breaker", "breaker", b.name)
	}
}

// watch keeps this worker's view of the fleet's state fresh while no call
// asks, and finds out when a failed store answers again.
func (b *Breaker) watch() {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			_, _ = b.readShared()
		}
	}
}
