package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// cancellation is compensation's change: order CANCELLED, stock released.
func cancellation(payment status.Payment) store.Change {
	return store.Change{OrderID: "o1", Order: status.OrderCancelled, Payment: payment, Reservation: store.ReleaseReservation,
		Cause: "cancelled by an operator"}
}

// A repeated Reserve (a run of the first workflow task again) reads the
// order once a step of it in flight has committed: a create being begun by
// an earlier run that stalled is seen, not missed.
func TestRepeatedReserveWaitsForAStepInFlight(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	release := testenv.BlockWrites(t, s.Pool(), "INSERT", "payment_attempts")
	begun := make(chan error, 1)
	go func() {
		_, err := s.BeginAttempt(ctx, store.AttemptRequest{OrderID: "o1"})
		begun <- err
	}()
	testenv.WaitLockWaiters(t, s.Pool(), 1, "advisory", "BeginAttempt inside its transaction")

	type reserved struct {
		o   store.Order
		err error
	}
	again := make(chan reserved, 1)
	go func() {
		o, err := s.Reserve(ctx, newOrder("o1", 1))
		again <- reserved{o, err}
	}()
	var r reserved
	done := false
	testenv.Eventually(t, 30*time.Second, func() bool {
		select {
		case r = <-again:
			done = true
			return true
		default:
		}
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == 2
	}, "the repeated Reserve answered or waits")
	require.False(t, done, "Reserve answered while a create was being begun: %+v", r)
	release()
	require.NoError(t, <-begun)
	r = <-again
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.o.Attempts, "the create begun meanwhile is counted")
}

// Cancel closes a create still on the wire as UNKNOWN, so that its sender's
// answer is refused afterwards; and a caller that did not search the
// gateway is refused while a create may have reached it.
func TestCancelFencesACreateOnTheWire(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{})
	require.True(t, b.Send)

	err := s.Cancel(ctx, cancellation(""), store.CancelCheck{Unsearched: true})
	require.ErrorIs(t, err, store.ErrMaybeSent, "unsearched, over a create on the wire")
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderRequesting, o.Status, "refused: nothing changed")
	assert.Equal(t, "SENDING", attemptState(t, s))
	requireStock(t, s, 9, 1, 0)

	require.NoError(t, s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{}))
	o, err = s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, "ANSWERED", attemptState(t, s), "closed by the cancel")
	requireStock(t, s, 10, 0, 0)
	err = s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: 1, Outcome: store.OutcomeAccepted, TransactionKey: "tx"})
	var te *store.TransitionError
	require.ErrorAs(t, err, &te, "the sender's late answer is refused")
	assert.Equal(t, "attempt", te.Entity)

	require.NoError(t, s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{Unsearched: true}), "a repeat over the CANCELLED order")
}

// With nothing that may have reached the gateway, an unsearched cancel goes
// through: a create refused at the dial proves nothing was charged.
func TestCancelWithoutSearchAfterAnUnreachableCreate(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	begin(t, s, store.AttemptRequest{})
	finish(t, s, 1, store.OutcomeUnreachable, "")
	require.NoError(t, s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{Unsearched: true}))
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
}

func attemptState(t *testing.T, s *store.Store) string {
	t.Helper()
	list, err := s.Attempts(context.Background(), "o1")
	require.NoError(t, err)
	require.Len(t, list, 1)
	return list[0].State
}

// A create still SENDING whose transaction a lookup already found (the
// payment PENDING with its key): the cancel closes the attempt, and moves
// the payment from PENDING, where closing the attempt UNKNOWN alone would
// have tried PENDING -> UNKNOWN and refused the cancel every time.
func TestCancelOverASendingCreateWhoseTransactionWasFound(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{})
	require.True(t, b.Send)
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Payment: status.PaymentPending, TransactionKey: "tx1",
		Cause: "transaction found by lookup"}))

	require.NoError(t, s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{}))
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
	assert.Equal(t, status.PaymentCancelled, o.PaymentStatus)
	assert.Equal(t, "ANSWERED", attemptState(t, s))
	requireStock(t, s, 10, 0, 0)
}

// An answer that comes after the order ended (a settle overtook its
// sender) is recorded on the attempt, which no longer stays SENDING, moves
// no status, and is reported as refused for the order.
func TestAnAnswerAfterTheOrderEndedIsRecordedAndRefused(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	begin(t, s, store.AttemptRequest{})
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderFailed, Payment: status.PaymentFailed,
		Reservation: store.ReleaseReservation, Cause: "payment FAILED: found by the recovery"}))

	err := s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: 1, Outcome: store.OutcomeAccepted, TransactionKey: "tx2"})
	var te *store.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "order", te.Entity)
	assert.Equal(t, string(status.OrderFailed), te.From)
	list, err := s.Attempts(ctx, "o1")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "ANSWERED", list[0].State)
	assert.Equal(t, store.OutcomeAccepted, list[0].Outcome)
	assert.Equal(t, "tx2", list[0].TransactionKey)
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderFailed, o.Status, "no status moved")
	assert.Equal(t, status.PaymentFailed, o.PaymentStatus)

	// A repeat (the first's commit went through unseen) is refused for the
	// order again, so that its sender still undoes the charge.
	err = s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: 1, Outcome: store.OutcomeAccepted, TransactionKey: "tx2"})
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "order", te.Entity)
}

// A compensation's search by order id sees only what reached the gateway
// before it: a create answered accepted after it may have been missed, and
// the cancel is refused until a search made after that answer.
func TestCancelRefusesACreateAnsweredAfterTheSearch(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	begin(t, s, store.AttemptRequest{})
	searched, err := s.Now(ctx)
	require.NoError(t, err)
	finish(t, s, 1, store.OutcomeAccepted, "tx1")

	err = s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{SearchedAt: searched})
	require.ErrorIs(t, err, store.ErrMaybeSent, "answered after the search")
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status, "refused: nothing changed")

	again, err := s.Now(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Cancel(ctx, cancellation(status.PaymentCancelled), store.CancelCheck{SearchedAt: again}))
	o, err = s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderCancelled, o.Status)
}

// The charge a CONFIRMED order was paid with is never rewritten: a second
// confirm with another transaction is refused.
func TestAConfirmedOrdersChargeIsNeverRewritten(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	confirm := func(key string) error {
		return s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderConfirmed, Payment: status.PaymentSuccess, TransactionKey: key,
			Reservation: store.CommitReservation, Cause: "payment SUCCESS: definitive answer"})
	}
	require.NoError(t, confirm("K1"))
	require.NoError(t, confirm("K1"), "a repeat")
	require.ErrorIs(t, confirm("K2"), store.ErrIllegalTransition)
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, "K1", o.TransactionKey)
}
