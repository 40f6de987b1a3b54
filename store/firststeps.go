package store

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/status"
)

// FirstStepChannel is the notification channel on which an order's first
// step — it leaves RESERVING: reserved, rejected or cancelled — is
// announced as "<order id> <status>", by a trigger in the transaction that moves
// it (migration 010), so it is heard when that transaction commits.
const FirstStepChannel = "payguard_first_step"

// Reconnection of the listening connection backs off from firstStepsRetry
// to firstStepsRetryMax.
const (
	firstStepsRetry    = 100 * time.Millisecond
	firstStepsRetryMax = 5 * time.Second
)

// FirstSteps listens on FirstStepChannel over one connection of its own and
// wakes whoever watches the order it hears of: the HTTP API's requests
// waiting for a new order's first answer, fanned out from one listener per
// process. While the connection is down (it reconnects by itself) a
// notification may be lost, so a watch says whether it could have missed
// one (Watch.Listening) and is woken when the connection drops: its owner
// reads the order's row instead, as it would without a listener.
type FirstSteps struct {
	cfg    *pgx.ConnConfig
	onDown func(error) // told each time the connection is lost or cannot be made
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	watches map[string]map[*Watch]struct{}
	up      bool
	epoch   uint64 // one more at each LISTEN: a watch begun in another epoch may have missed its notification
}

// ListenFirstSteps starts listening on FirstStepChannel on a connection of
// its own (the pool's settings); onDown, when not nil, hears why the
// connection was lost or could not be made. Close stops it.
func (s *Store) ListenFirstSteps(onDown func(error)) *FirstSteps {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "payguard-first-steps"
	ctx, cancel := context.WithCancel(context.Background())
	f := &FirstSteps{cfg: cfg, onDown: onDown, cancel: cancel, done: make(chan struct{}),
		watches: map[string]map[*Watch]struct{}{}}
	go f.run(ctx)
	return f
}

// Close stops listening and wakes every watch (none can hear its order now).
func (f *FirstSteps) Close() {
	f.cancel()
	<-f.done
}

// Listening reports whether the connection listens now.
func (f *FirstSteps) Listening() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up
}

// Watch is one wait for an order's first step. Begin it before whatever
// may move the order (the workflow's start), so that no notification of it
// can come before the watch.
type Watch struct {
	f       *FirstSteps
	orderID string
	epoch   uint64
	live    bool
	// Woken receives when the order's first step is heard (Heard then
	// says it), or when the connection drops (its notification may be
	// lost): read the row then.
	Woken chan struct{}
	heard status.Order // guarded by f.mu
}

// Watch begins watching orderID; Close ends it.
func (f *FirstSteps) Watch(orderID string) *Watch {
	w := &Watch{f: f, orderID: orderID, Woken: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.epoch, w.live = f.epoch, f.up
	set := f.watches[orderID]
	if set == nil {
		set = map[*Watch]struct{}{}
		f.watches[orderID] = set
	}
	set[w] = struct{}{}
	return w
}

// OrderID is the order watched.
func (w *Watch) OrderID() string { return w.orderID }

// Listening reports whether every notification since the watch began has
// been heard: the connection has listened all along. While it is true, the
// order's first step wakes the watch; once false, it may not.
func (w *Watch) Listening() bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.live && w.f.up && w.f.epoch == w.epoch
}

// Heard is the status the order's first step moved it to, as announced
// at its commit; "" until heard.
func (w *Watch) Heard() status.Order {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.heard
}

// Close ends the watch.
func (w *Watch) Close() {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if set := w.f.watches[w.orderID]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(w.f.watches, w.orderID)
		}
	}
}

func (w *Watch) wake() {
	select {
	case w.Woken <- struct{}{}:
	default: // already woken, not yet read
	}
}

func (f *FirstSteps) run(ctx context.Context) {
	defer close(f.done)
	defer f.setDown()
	retry := firstStepsRetry
	for {
		listened, err := f.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		f.setDown()
		if f.onDown != nil {
			f.onDown(err)
		}
		if listened {
			retry = firstStepsRetry
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, firstStepsRetryMax)
	}
}

// listen connects, listens and wakes the watches of what it hears until
// the connection fails or ctx ends; listened says it got as far as
// listening.
func (f *FirstSteps) listen(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, f.cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{FirstStepChannel}.Sanitize()); err != nil {
		return false, err
	}
	f.mu.Lock()
	f.epoch++
	f.up = true
	f.mu.Unlock()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		orderID, to, ok := strings.Cut(n.Payload, " ")
		if !ok {
			continue
		}
		f.mu.Lock()
		for w := range f.watches[orderID] {
			w.heard = status.Order(to)
			w.wake()
		}
		f.mu.Unlock()
	}
}

// setDown marks the connection down and wakes every watch: what they wait
// for may have been missed.
func (f *FirstSteps) setDown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = false
	for _, set := range f.watches {
		for w := range set {
			w.wake()
		}
	}
}
