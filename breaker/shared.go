package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// The fleet scope: gobreaker's DistributedCircuitBreaker instances over the
// shared store, each used by one operation at a time under the shared
// lease (a store handle holds its own lease). One instance runs this
// worker's guarded calls, one at a time; the outcomes of free calls are
// recorded through others, kept in a free list.

// recordWait bounds how long a free call waits to record its outcome while
// another holds the lease: the lease is held for long only by a guarded
// call, and a free call's outcome then counts for little (the state has
// moved on, or is being judged one call at a time). Its caller is not held
// up longer for the bookkeeping.
const recordWait = 500 * time.Millisecond

// busyMemo bounds how long a lease seen taken is refused from memory
// without looking again: a holder usually gives it back long before its
// lease runs out, which the next look (the watcher's, at the latest) sees.
const busyMemo = 2 * WatchEvery

// gobreaker v2's keys for a breaker's shared state and for its mutex
// (DistributedCircuitBreaker's sharedStateKey and mutexKey).
func stateKey(name string) string { return "gobreaker:state:" + name }
func mutexKey(name string) string { return "gobreaker:mutex:" + name }

// errShared marks a failure of the shared store (not a refusal, not the
// call's own error).
type errShared struct{ err error }

func (e errShared) Error() string { return "shared breaker store: " + e.err.Error() }
func (e errShared) Unwrap() error { return e.err }

// errBusy is the lease held by another, for at most left more.
type errBusy struct{ left time.Duration }

func (e errBusy) Error() string { return "breaker lease held by another" }

// errStale is the outcome of a call that set out under a state the fleet
// has since left (another generation): it counts for nothing, as gobreaker
// does with a call of an older generation. It is excluded from the counts,
// so it takes no half-open trial's place either.
var errStale = errors.New("outcome of an earlier generation")

// anyGeneration is a call that set out before the fleet had any state.
const anyGeneration = ^uint64(0)

func (b *Breaker) newInstance() *instance {
	return &instance{handle: b.shared.NewHandle(func(op string, took time.Duration, err error) {
		if b.obs != nil {
			b.obs.StoreCall(b.name, op, took, err)
		}
	})}
}

// build makes the instance's DistributedCircuitBreaker, which reads the
// shared state (writing a first one if there is none): under the lease,
// which the caller holds.
func (b *Breaker) build(in *instance) error {
	settings := b.settings
	settings.OnStateChange = nil
	settings.IsExcluded = func(err error) bool {
		return errors.Is(err, errStale) || (b.settings.IsExcluded != nil && b.settings.IsExcluded(err))
	}
	dcb, err := newDistributed(in.handle, settings)
	if err != nil {
		return err
	}
	in.dcb = dcb
	return nil
}

// newDistributed is gobreaker.NewDistributedCircuitBreaker, which (v2.4.0)
// panics when it fails after taking the lock: it returns a nil breaker and
// its deferred unlock calls through it. The panic becomes the error; the
// lease is the caller's to give back.
func newDistributed(h Handle, settings gobreaker.Settings) (dcb *gobreaker.DistributedCircuitBreaker[struct{}], err error) {
	defer func() {
		if r := recover(); r != nil {
			dcb = nil
			if err = h.ReadErr(); err == nil {
				err = fmt.Errorf("build the shared breaker: %v", r)
			}
		}
	}()
	return gobreaker.NewDistributedCircuitBreaker[struct{}](h, settings)
}

// start builds the trial instance, which writes the fleet's first state if
// there is none, and reads the state. A lease busy for longer than a
// record would wait leaves the instance to be built at its first use.
func (b *Breaker) start() {
	key := mutexKey(b.name)
	ok, _, err := b.trial.handle.Hold(key, recordWait)
	if ok {
		err = b.build(b.trial)
		if rerr := b.trial.handle.Release(key); err == nil {
			err = rerr
		}
	}
	if err != nil {
		b.degradeLocked(err)
		return
	}
	_, _ = b.readShared()
}

func (b *Breaker) checkout() *instance {
	b.mu.Lock()
	if n := len(b.free); n > 0 {
		in := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return in
	}
	b.mu.Unlock()
	return b.newInstance()
}

func (b *Breaker) checkin(in *instance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free = append(b.free, in)
}

// readShared reads the fleet's state and its lease without taking it, and
// takes them as seen. No state yet is a closed breaker nobody counted in.
// A failure degrades this worker to its local breaker.
func (b *Breaker) readShared() (gobreaker.SharedState, error) {
	start := time.Now()
	snap, err := b.shared.Read(stateKey(b.name), mutexKey(b.name))
	if b.obs != nil {
		b.obs.StoreCall(b.name, "read", time.Since(start), err)
	}
	st := gobreaker.SharedState{Generation: anyGeneration}
	if err == nil && len(snap.Data) > 0 {
		st, err = decode(snap.Data)
	}
	if err != nil {
		b.degradeLocked(err)
		return st, err
	}
	b.recovered()
	if len(snap.Data) > 0 {
		b.seeShared(st)
	}
	b.seeLease(snap.LeaseLeft)
	return st, nil
}

// seeLease takes a look at the lease as seen: held for up to left more (0:
// free). Seen taken, it is refused from memory until busyMemo has passed.
func (b *Breaker) seeLease(left time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busyUntil = time.Time{}
	if left > 0 {
		b.busyUntil = time.Now().Add(min(left, busyMemo))
	}
}

// record writes a free call's outcome into the shared state, if the state
// is still of the generation the call set out under (gen). It waits for
// the lease no longer than recordWait; an outcome it cannot write then is
// dropped.
func (b *Breaker) record(outcome error, gen uint64) {
	in := b.checkout()
	defer b.checkin(in)
	_, err := b.execute(in, recordWait, func() error {
		if st, err := decode(in.handle.Read()); gen != anyGeneration && (err != nil || st.Generation != gen) {
			return errStale
		}
		return outcome
	})
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
// may trip the breaker (state is which). It never waits for the lease: a
// holder keeps it for a whole gateway call, and meanwhile this one is
// refused at once, as is any other call of this worker while its own
// guarded call is under way.
func (b *Breaker) guarded(req func() error, state gobreaker.State) error {
	if !b.guarding.CompareAndSwap(false, true) {
		return b.busyRefusal(state)
	}
	defer b.guarding.Store(false)
	var reqErr error
	called, err := b.execute(b.trial, 0, func() error {
		reqErr = req()
		return reqErr
	})
	if called {
		return reqErr
	}
	var (
		busy   errBusy
		shared errShared
	)
	switch {
	case errors.As(err, &busy):
		b.seeLease(busy.left)
		return b.busyRefusal(state)
	case errors.As(err, &shared) && b.contended(shared.err):
		return b.busyRefusal(state)
	case errors.As(err, &shared):
		b.degradeLocked(shared.err)
		return b.doLocal(req)
	}
	return b.refusal(err)
}

// busyRefusal refuses a call that needs the lease while another has it.
func (b *Breaker) busyRefusal(state gobreaker.State) error {
	return &OpenError{Name: b.name, State: state, RetryAfter: trialWait}
}

// execute runs req through the instance's DistributedCircuitBreaker, under
// the lease held for the whole operation (waited for up to wait), and takes
// the state it wrote as seen. called says whether req ran; err is req's
// error, gobreaker's refusal, an errBusy or an errShared.
func (b *Breaker) execute(in *instance, wait time.Duration, req func() error) (called bool, err error) {
	key := mutexKey(b.name)
	ok, left, err := in.handle.Hold(key, wait)
	if err != nil {
		return false, errShared{err}
	}
	if !ok {
		return false, errBusy{left}
	}
	defer func() { _ = in.handle.Release(key) }()
	if in.dcb == nil {
		if err := b.build(in); err != nil {
			return false, errShared{err}
		}
	}
	var reqErr error
	_, err = in.dcb.Execute(func() (struct{}, error) {
		called = true
		reqErr = req()
		return struct{}{}, reqErr
	})
	// The state written, or else the one read: a refusal then tells this
	// worker what the fleet's state is (opened again elsewhere).
	data := in.handle.Written()
	if len(data) == 0 {
		data = in.handle.Read()
	}
	if st, derr := decode(data); derr == nil {
		b.seeShared(st)
	}
	switch {
	case err == nil, called && err == reqErr:
		return called, reqErr
	case !called && (errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)):
		return false, err
	case errors.Is(err, gobreaker.ErrNoSharedState) && in.handle.ReadErr() != nil:
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
