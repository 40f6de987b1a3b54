package breaker

import (
	"encoding/json"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Heard is word from the gateway that did not come through this breaker: it
// answered another kind of call (a create, through the request breaker). An
// open state then ends now, as if its time were up: the breaker is half-open
// and its trials decide at once, instead of after the rest of its open
// period, which an outage that ended early in it would spend refusing calls
// to a gateway that answers. It never closes the breaker: its trials must
// still succeed. A breaker this worker does not see open is left alone, at
// the cost of one look at its memory.
//
// The fleet breaker's shared state gets the new expiry under the lease, in
// the same generation, so every worker's watcher takes it up; a lease held
// by another (a trial or a trip under way, deciding anyway) or a store that
// fails leaves the state as it is: the open period then simply runs out. A
// process breaker (gobreaker's own, which has no way into half-open from
// outside) starts again closed with empty counts, and trips again on
// --breaker-consecutive-failures if the gateway is still down for it.
func (b *Breaker) Heard() {
	now := time.Now()
	b.mu.Lock()
	open := now.Before(b.openUntil)
	b.mu.Unlock()
	if !open {
		return
	}
	if b.shared == nil || b.isDegraded() {
		b.hearLocal()
		return
	}
	b.hearShared(now)
}

// Missed is the other word from outside: a call of another kind (a create)
// could not reach the gateway, which says the same of this breaker's calls.
// It is counted as this breaker's own call with that outcome would be (by
// the rules' IsSuccessful and IsExcluded), so an outage trips the breaker on
// the traffic of both kinds; an open breaker, or one whose trial calls are
// taken, counts nothing.
func (b *Breaker) Missed(outcome error) {
	_ = b.Do(func() error { return outcome })
}

func (b *Breaker) hearLocal() {
	if b.local.Load().State() != gobreaker.StateOpen {
		return
	}
	b.local.Store(b.newLocal())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.see(gobreaker.StateClosed, time.Time{}, gobreaker.Counts{})
}

func (b *Breaker) hearShared(now time.Time) {
	in := b.checkout()
	defer b.checkin(in)
	key := mutexKey(b.name)
	ok, _, err := in.handle.Hold(key, 0)
	if err != nil || !ok {
		return
	}
	defer func() { _ = in.handle.Release(key) }()
	data, err := in.handle.GetData(stateKey(b.name))
	if err != nil {
		return
	}
	st, err := decode(data)
	if err != nil {
		return
	}
	if st.State == gobreaker.StateOpen && st.Expiry.After(now) {
		st.Expiry = now
		if data, err = json.Marshal(st); err != nil || in.handle.SetData(stateKey(b.name), data) != nil {
			return
		}
	}
	b.seeShared(st)
}
