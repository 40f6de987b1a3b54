package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payguard/payguard/breaker"
)

// The fleet's breaker state (migration 003): gobreaker v2's SharedDataStore
// on two tables, one for the state and one for the mutex as a lease.

// ErrLeaseHeld is a breaker mutex that another holder still has: contention,
// not an outage.
var ErrLeaseHeld = errors.New("breaker lease held by another worker")

// ErrLeaseLost is a write refused because the writer's lease ran out (and
// may have been taken over): the state moved on without it. Contention too.
var ErrLeaseLost = fmt.Errorf("%w: ours ran out before the write", ErrLeaseHeld)

// BreakerOpTimeout bounds every statement of the shared breaker store: the
// SharedDataStore interface carries no context, and a hung database must
// not hang a lookup.
const BreakerOpTimeout = 2 * time.Second

// BreakerLease is how long a fleet breaker's lease must last when the
// longest call made under it (a half-open trial) takes call: the call, and
// the statements around it that the holder waits for (the lease taken, the
// state read before the call), each bounded by BreakerOpTimeout. The state
// written after the call is checked against the lease by the database, so
// a lease that outlives these has not run out while its trial may still be
// waiting for its answer: no second trial starts meanwhile.
func BreakerLease(call time.Duration) time.Duration { return call + 2*BreakerOpTimeout }

// The pauses between two tries at a lease held by another, for a caller
// that waits: short at first, because a holder keeps it for a few
// statements, then longer, so that waiters do not load the database while
// a trial holds it for a whole gateway call.
const (
	leaseRetry    = 5 * time.Millisecond
	leaseRetryMax = 50 * time.Millisecond
)

// BreakerHandle is one breaker instance's view of the shared store: a
// gobreaker.SharedDataStore with its own lease holder. Use one handle per
// gobreaker.DistributedCircuitBreaker and that breaker from one goroutine
// at a time.
//
// gobreaker v2.4.0 reads the shared state before it takes the mutex
// (DistributedCircuitBreaker.Execute and State); two workers could then
// both update the same old state and one update would be lost. So once a
// handle knows its mutex (the constructor locks first), GetData takes the
// lease before it reads, Lock finds it already held, and Unlock gives it
// back. A failed or empty read gives it back at once, since gobreaker then
// returns without unlocking.
//
// Hold takes the lease for a whole gobreaker operation instead (building
// the breaker, then Execute): gobreaker's Lock finds it held and its Unlock
// leaves it so, until Release.
type BreakerHandle struct {
	store   *Store
	lease   time.Duration
	holder  string
	mutex   string // the key gobreaker locks, learnt at its first Lock
	state   string // the key gobreaker keeps its state under
	held    bool
	pinned  bool  // taken by Hold: kept until Release
	readErr error // the last GetData's failure: gobreaker reports it as no state at all
	read    []byte
	written []byte
	observe func(op string, took time.Duration, err error)
}

// BreakerHandle returns a new handle whose leases last lease (longer than
// anything done while holding one: a trial call included). observe, if not
// nil, sees every statement's latency and error (op: lock, unlock, get, set).
func (s *Store) BreakerHandle(lease time.Duration, observe func(op string, took time.Duration, err error)) *BreakerHandle {
	var id [12]byte
	_, _ = rand.Read(id[:])
	if observe == nil {
		observe = func(string, time.Duration, error) {}
	}
	return &BreakerHandle{store: s, lease: lease, holder: hex.EncodeToString(id[:]), observe: observe}
}

// Lock takes the lease on key, waiting up to the lease's length for a
// holder to give it back or for its lease to run out; then ErrLeaseHeld.
func (h *BreakerHandle) Lock(key string) error {
	if h.mutex == "" {
		h.mutex = key
	}
	if h.held {
		return nil
	}
	return h.acquire(key)
}

func (h *BreakerHandle) acquire(key string) error {
	ok, _, err := h.take(key, h.lease)
	if err == nil && !ok {
		err = ErrLeaseHeld
	}
	return err
}

// Hold takes the lease on key, waiting up to wait for a holder to give it
// back or for its lease to run out (0: one try), and keeps it through
// gobreaker's Lock and Unlock until Release. When another still has it, ok
// is false and left is how long its lease lasts at most.
func (h *BreakerHandle) Hold(key string, wait time.Duration) (ok bool, left time.Duration, err error) {
	h.mutex = key
	if !h.held {
		if ok, left, err = h.take(key, wait); !ok {
			return ok, left, err
		}
	}
	h.pinned = true
	return true, 0, nil
}

// Release gives back a lease taken by Hold.
func (h *BreakerHandle) Release(key string) error {
	h.pinned = false
	return h.Unlock(key)
}

// take tries for the lease until wait has passed, pausing between tries.
func (h *BreakerHandle) take(key string, wait time.Duration) (ok bool, left time.Duration, err error) {
	deadline := time.Now().Add(wait)
	pause := leaseRetry
	for {
		start := time.Now()
		ok, left, err = h.tryAcquire(key)
		h.observe("lock", time.Since(start), err)
		if err != nil || ok {
			h.held = ok
			return ok, left, err
		}
		if !time.Now().Add(pause).Before(deadline) {
			return false, left, nil
		}
		time.Sleep(pause)
		pause = min(2*pause, leaseRetryMax)
	}
}

// tryAcquire takes the lease if it is free, ran out, or is already ours;
// else it says how long the holder's lease lasts (as it stood before the
// statement: the subquery reads the statement's snapshot, not its insert).
func (h *BreakerHandle) tryAcquire(key string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), BreakerOpTimeout)
	defer cancel()
	var took bool
	var left float64
	err := h.store.pool.QueryRow(ctx, `
		WITH took AS (
			INSERT INTO breaker_leases (key, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
			ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE breaker_leases.expires_at < now() OR breaker_leases.holder = EXCLUDED.holder
			RETURNING holder)
		SELECT EXISTS (SELECT 1 FROM took),
			COALESCE((SELECT extract(epoch FROM expires_at - now()) FROM breaker_leases WHERE key = $1), 0)::float8`,
		key, h.holder, h.lease.Seconds()).Scan(&took, &left)
	if err != nil {
		return false, 0, fmt.Errorf("take breaker lease %s: %w", key, err)
	}
	return took, max(time.Duration(left*float64(time.Second)), 0), nil
}

// Unlock gives the lease back, unless Hold keeps it. A lease that ran out
// and was taken over is the new holder's: it is left alone.
func (h *BreakerHandle) Unlock(key string) error {
	if h.pinned {
		return nil
	}
	h.held = false
	ctx, cancel := context.WithTimeout(context.Background(), BreakerOpTimeout)
	defer cancel()
	start := time.Now()
	_, err := h.store.pool.Exec(ctx, `DELETE FROM breaker_leases WHERE key = $1 AND holder = $2`, key, h.holder)
	h.observe("unlock", time.Since(start), err)
	if err != nil {
		return fmt.Errorf("give back breaker lease %s: %w", key, err)
	}
	return nil
}

// GetData reads the state under key, holding the lease first (see the type).
func (h *BreakerHandle) GetData(key string) ([]byte, error) {
	h.state = key
	h.written = nil // every gobreaker operation reads first: Written is this one's
	if h.mutex != "" && !h.held {
		if err := h.acquire(h.mutex); err != nil {
			h.readErr = err
			return nil, err
		}
	}
	start := time.Now()
	data, err := h.store.ReadBreakerState(key)
	h.observe("get", time.Since(start), err)
	h.readErr, h.read = err, data
	if (err != nil || len(data) == 0) && h.held && h.mutex != "" {
		_ = h.Unlock(h.mutex)
	}
	return data, err
}

// SetData writes the state under key, and only while this handle's lease
// holds (by the database's clock): a holder whose lease ran out may have
// been succeeded by another that wrote since, and its state is older than
// that one (ErrLeaseLost). Without the lease (given back after an empty
// read: a breaker's first state) it only creates a state none wrote yet.
// It never writes after a failed read: gobreaker takes any failed read for
// "no state yet" and would write a fresh closed state over the fleet's.
func (h *BreakerHandle) SetData(key string, data []byte) error {
	h.state = key
	if h.readErr != nil {
		return h.readErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), BreakerOpTimeout)
	defer cancel()
	start := time.Now()
	var err error
	if h.held {
		// FOR UPDATE keeps a successor from taking the lease over until the
		// write has committed; it then reads what was written.
		var tag pgconn.CommandTag
		tag, err = h.store.pool.Exec(ctx, `
			WITH held AS (
				SELECT 1 FROM breaker_leases WHERE key = $3 AND holder = $4 AND expires_at > now() FOR UPDATE)
			INSERT INTO breaker_state (key, data) SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM held)
			ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data, updated_at = now()`, key, data, h.mutex, h.holder)
		if err == nil && tag.RowsAffected() == 0 {
			err = ErrLeaseLost
		}
		if err == nil {
			h.written = data
		}
	} else {
		var tag pgconn.CommandTag
		tag, err = h.store.pool.Exec(ctx, `INSERT INTO breaker_state (key, data) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, data)
		if err == nil && tag.RowsAffected() == 1 {
			h.written = data
		}
	}
	h.observe("set", time.Since(start), err)
	if err != nil {
		return fmt.Errorf("write breaker state %s: %w", key, err)
	}
	return nil
}

// StateKey is the key the handle's breaker keeps its state under, known
// once the breaker was built.
func (h *BreakerHandle) StateKey() string { return h.state }

// Read is the state the handle's latest GetData returned.
func (h *BreakerHandle) Read() []byte { return h.read }

// ReadErr is the last read's failure (nil after a read that worked):
// gobreaker reports any failed read as ErrNoSharedState.
func (h *BreakerHandle) ReadErr() error { return h.readErr }

// Written is the state the handle wrote in its latest operation, if any.
func (h *BreakerHandle) Written() []byte { return h.written }

// SharedBreakers is the fleet's breaker store for breaker.New: handles
// whose leases last lease, lock-free reads, and ErrLeaseHeld as contention.
func (s *Store) SharedBreakers(lease time.Duration) *breaker.Shared {
	return &breaker.Shared{
		NewHandle: func(observe func(string, time.Duration, error)) breaker.Handle {
			return s.BreakerHandle(lease, observe)
		},
		Read:       s.ReadBreakerSnapshot,
		Contention: func(err error) bool { return errors.Is(err, ErrLeaseHeld) },
	}
}

// ReadBreakerSnapshot reads a breaker's shared state and how long anyone
// still holds its lease, in one statement and without taking it.
func (s *Store) ReadBreakerSnapshot(stateKey, mutexKey string) (breaker.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), BreakerOpTimeout)
	defer cancel()
	var snap breaker.Snapshot
	var left float64
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT data FROM breaker_state WHERE key = $1),
			COALESCE((SELECT extract(epoch FROM expires_at - now()) FROM breaker_leases WHERE key = $2 AND expires_at > now()), 0)::float8`,
		stateKey, mutexKey).Scan(&snap.Data, &left)
	if err != nil {
		return breaker.Snapshot{}, fmt.Errorf("read breaker state %s: %w", stateKey, err)
	}
	snap.LeaseLeft = max(time.Duration(left*float64(time.Second)), 0)
	return snap, nil
}

// ReadBreakerState reads a breaker's shared state without any lease: for
// the worker's cached view, never for an update. No state is nil, nil.
func (s *Store) ReadBreakerState(key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), BreakerOpTimeout)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM breaker_state WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read breaker state %s: %w", key, err)
	}
	return data, nil
}
