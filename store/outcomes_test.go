package store_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Each order is taken to its end through the store's own steps, as the
// workflow's activities take it, and Outcomes must tell a lost order from
// one an operator cancelled or the gateway decided.
func TestOutcomesTellLostOrdersFromOperatorsAndDecisions(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	heard := &recorder{}
	s.Observe(heard)
	deadline := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	reserve := func(id string) {
		o := newOrder(id, 1)
		o.Deadline = deadline
		_, err := s.Reserve(ctx, o)
		require.NoError(t, err)
	}
	advance := func(c store.Change) { require.NoError(t, s.Advance(ctx, c)) }
	pending := func(id, key string) {
		advance(store.Change{OrderID: id, Order: status.OrderPending, Payment: status.PaymentPending, TransactionKey: key, Cause: "create accepted"})
	}
	cancel := func(id string, payment status.Payment, cause string) {
		require.NoError(t, s.Cancel(ctx, store.Change{OrderID: id, Order: status.OrderCancelled, Payment: payment,
			Reservation: store.ReleaseReservation, Cause: cause}, store.CancelCheck{}))
	}
	const deadlineCause = "deadline passed without a definitive answer"

	reserve("confirmed")
	pending("confirmed", "k-c")
	advance(store.Change{OrderID: "confirmed", Order: status.OrderConfirmed, Payment: status.PaymentSuccess, TransactionKey: "k-c",
		Reservation: store.CommitReservation, Cause: "payment SUCCESS"})
	reserve("failed")
	advance(store.Change{OrderID: "failed", Order: status.OrderFailed, Payment: status.PaymentFailed, Reason: "LIMIT_EXCEEDED",
		Reservation: store.ReleaseReservation, Cause: "payment FAILED"})
	reserve("deadline")
	cancel("deadline", status.PaymentCancelled, deadlineCause)
	reserve("operator")
	cancel("operator", status.PaymentCancelled, store.CauseOperatorCancel)
	reserve("operator-kept")
	cancel("operator-kept", "", store.CauseOperatorCancel+" (payment kept FAILED)")
	reserve("refunded")
	pending("refunded", "k-r")
	cancel("refunded", status.PaymentRefunded, deadlineCause)
	reserve("operator-refunded")
	pending("operator-refunded", "k-or")
	cancel("operator-refunded", status.PaymentRefunded, store.CauseOperatorCancel)
	// A FAILED order whose other transaction was charged, and refunded.
	reserve("failed-refunded")
	advance(store.Change{OrderID: "failed-refunded", Order: status.OrderFailed, Payment: status.PaymentFailed,
		Reservation: store.ReleaseReservation, Cause: "payment FAILED"})
	advance(store.Change{OrderID: "failed-refunded", Payment: status.PaymentRefunded, Cause: "late SUCCESS refunded"})
	// A retried step moves nothing and is not heard of again.
	advance(store.Change{OrderID: "failed-refunded", Payment: status.PaymentRefunded, Cause: "late SUCCESS refunded"})
	cancel("deadline", status.PaymentCancelled, deadlineCause)
	reserve("open")
	_, err := s.Reserve(ctx, newOrder("rejected", 100))
	require.ErrorIs(t, err, store.ErrOutOfStock)

	ids := []string{"confirmed", "failed", "deadline", "operator", "operator-kept", "refunded", "operator-refunded",
		"failed-refunded", "open", "rejected", "never-placed"}
	before := time.Now()
	got, err := s.Outcomes(ctx, ids)
	require.NoError(t, err)
	byID := map[string]store.Outcome{}
	var order []string
	for _, o := range got {
		byID[o.OrderID] = o
		order = append(order, o.OrderID)
	}
	assert.Equal(t, []string{"confirmed", "deadline", "failed", "failed-refunded", "open", "operator", "operator-kept",
		"operator-refunded", "refunded", "rejected"}, order, "sorted by id; an id the database does not hold is left out")

	for id, want := range map[string]string{
		"confirmed": "", "failed": "", "operator": "", "operator-kept": "", "operator-refunded": "", "open": "", "rejected": "",
		"deadline": store.LostCancelled, "refunded": store.LostRefunded, "failed-refunded": store.LostRefunded,
	} {
		assert.Equal(t, want, byID[id].Lost, "%s (%s, payment %s)", id, byID[id].Status, byID[id].Payment)
	}
	for id, want := range map[string]bool{"operator": true, "operator-kept": true, "operator-refunded": true, "deadline": false, "refunded": false} {
		assert.Equal(t, want, byID[id].OperatorCancel, id)
	}
	assert.Equal(t, status.PaymentRefunded, byID["refunded"].Payment)
	assert.Empty(t, byID["open"].Payment, "no payment yet")

	// The observer heard of each final order once, with its status, and
	// of each lost one once, by the same definition.
	wantFinal, wantLost := map[string]status.Order{}, map[string]string{}
	for _, o := range got {
		if o.Status.Final() {
			wantFinal[o.OrderID] = o.Status
		}
		if o.Lost != "" {
			wantLost[o.OrderID] = o.Lost
		}
	}
	assert.Equal(t, wantFinal, heard.finalByID(t))
	assert.Equal(t, wantLost, heard.lostByID(t))

	for _, o := range got {
		assert.False(t, o.PlacedAt.IsZero(), o.OrderID)
		assert.False(t, o.PlacedAt.After(before), o.OrderID)
		if o.OrderID == "open" {
			assert.False(t, o.Final(), "REQUESTING is not final")
			assert.Zero(t, o.ToFinal())
			continue
		}
		require.True(t, o.Final(), o.OrderID)
		assert.False(t, o.FinalAt.Before(o.PlacedAt), o.OrderID)
		assert.False(t, o.FinalAt.After(before), o.OrderID)
		assert.Equal(t, o.FinalAt.Sub(o.PlacedAt), o.ToFinal(), o.OrderID)
	}
	assert.True(t, byID["confirmed"].Deadline.Equal(deadline), "the order's own deadline")
	assert.True(t, byID["rejected"].Deadline.IsZero(), "an order that named none")
}

// The final time is the move to the final status, not a later change of
// the payment (a late charge refunded after the order ended).
func TestOutcomeFinalAtIsTheMoveToTheFinalStatus(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	heard := &recorder{}
	s.Observe(heard)
	_, err := s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)
	require.NoError(t, s.Cancel(ctx, store.Change{OrderID: "o1", Order: status.OrderCancelled, Payment: status.PaymentCancelled,
		Reservation: store.ReleaseReservation, Cause: "deadline passed without a definitive answer"}, store.CancelCheck{}))
	first, err := s.Outcomes(ctx, []string{"o1"})
	require.NoError(t, err)
	require.Len(t, first, 1)
	assert.Equal(t, store.LostCancelled, first[0].Lost)
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Payment: status.PaymentRefunded, Cause: "late SUCCESS refunded"}))
	later, err := s.Outcomes(ctx, []string{"o1"})
	require.NoError(t, err)
	require.Len(t, later, 1)
	assert.Equal(t, store.LostRefunded, later[0].Lost, "charged, then refunded")
	assert.True(t, first[0].FinalAt.Equal(later[0].FinalAt), "still the move to CANCELLED")
	assert.Equal(t, map[string]string{"o1": store.LostCancelled}, heard.lostByID(t), "lost once, as it was when cancelled")
}

// A CONFIRMED order whose charge is refunded without the customer asking
// becomes lost at the refund; one refunded at the customer's request
// does not.
func TestObserverHearsAConfirmedOrderLostAtItsRefund(t *testing.T) {
	t.Parallel()
	s, ctx := stocked(t, 10)
	heard := &recorder{}
	s.Observe(heard)
	for _, id := range []string{"kept", "refunded", "customer"} {
		_, err := s.Reserve(ctx, newOrder(id, 1))
		require.NoError(t, err)
		require.NoError(t, s.Advance(ctx, store.Change{OrderID: id, Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
			TransactionKey: "k-" + id, Reservation: store.CommitReservation, Cause: "payment SUCCESS"}))
	}
	assert.Empty(t, heard.lostByID(t))
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "refunded", Payment: status.PaymentRefunded, Cause: "charge refunded by the sweep"}))
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "customer", Payment: status.PaymentRefunded, Cause: store.CauseCustomerRefund}))
	assert.Equal(t, map[string]string{"refunded": store.LostRefunded}, heard.lostByID(t))
	assert.Equal(t, map[string]status.Order{"kept": status.OrderConfirmed, "refunded": status.OrderConfirmed, "customer": status.OrderConfirmed},
		heard.finalByID(t))
}

// recorder is a store.Observer that keeps what it heard.
type recorder struct {
	mu    sync.Mutex
	final []string // "id status"
	lost  []string // "id kind"
}

func (r *recorder) OrderFinal(id string, st status.Order) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.final = append(r.final, id+" "+string(st))
}

func (r *recorder) OrderLost(id, kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, id+" "+kind)
}

// byID turns "id value" lines into a map, failing on an id heard twice.
func byID(t *testing.T, lines []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range lines {
		id, v, _ := strings.Cut(l, " ")
		if _, dup := out[id]; dup {
			t.Errorf("%s heard of twice", id)
		}
		out[id] = v
	}
	return out
}

func (r *recorder) finalByID(t *testing.T) map[string]status.Order {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]status.Order{}
	for id, v := range byID(t, r.final) {
		out[id] = status.Order(v)
	}
	return out
}

func (r *recorder) lostByID(t *testing.T) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return byID(t, r.lost)
}
