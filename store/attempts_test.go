package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

func reservedOrder(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	s, ctx := stocked(t, 10)
	_, err := s.Reserve(ctx, newOrder("o1", 1))
	require.NoError(t, err)
	return s, ctx
}

func begin(t *testing.T, s *store.Store, req store.AttemptRequest) store.Begun {
	t.Helper()
	req.OrderID = "o1"
	b, err := s.BeginAttempt(context.Background(), req)
	require.NoError(t, err)
	return b
}

func finish(t *testing.T, s *store.Store, no int, outcome, key string) {
	t.Helper()
	require.NoError(t, s.FinishAttempt(context.Background(), store.Answer{OrderID: "o1", No: no, Outcome: outcome,
		TransactionKey: key, Detail: "test"}))
}

func TestUnreachableCreatesMayBeSentAgainUpToTheLimit(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{Limit: 2})
	require.True(t, b.Send)
	assert.Equal(t, 1, b.Attempt.No)
	finish(t, s, 1, store.OutcomeUnreachable, "")
	require.NoError(t, s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: 1, Outcome: store.OutcomeUnreachable}), "a repeated answer")
	require.ErrorIs(t, s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: 1, Outcome: store.OutcomeAccepted, TransactionKey: "tx"}),
		store.ErrIllegalTransition, "another answer for a closed attempt")

	b = begin(t, s, store.AttemptRequest{Limit: 2})
	require.True(t, b.Send, "the gateway never saw #1")
	finish(t, s, 2, store.OutcomeUnreachable, "")
	b = begin(t, s, store.AttemptRequest{Limit: 2})
	assert.False(t, b.Send, "the limit counts creates in the database")
	assert.Equal(t, 2, b.Count)
	assert.Equal(t, store.OutcomeUnreachable, b.Attempt.Outcome)
}

func TestAnAnsweredCreateIsNeverSentAgain(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{})
	finish(t, s, b.Attempt.No, store.OutcomeAccepted, "tx1")
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status, "the answer and the status change are one transaction")
	assert.Equal(t, status.PaymentPending, o.PaymentStatus)
	assert.Equal(t, "tx1", o.TransactionKey)

	// Neither a retry nor a grant sends past an accepted create.
	for _, req := range []store.AttemptRequest{{}, {Grant: "resend-1"}, {IdempotencyKey: "k"}} {
		again := begin(t, s, req)
		assert.False(t, again.Send)
		assert.Equal(t, store.OutcomeAccepted, again.Attempt.Outcome)
		assert.Equal(t, "tx1", again.Attempt.TransactionKey)
	}
	attempts, err := s.Attempts(ctx, "o1")
	require.NoError(t, err)
	assert.Len(t, attempts, 1)
}

func TestAnUnknownCreateIsSentAgainOnlyUnderANewGrant(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{CallbackURL: "http://a/cb"})
	// The sender dies before recording the answer: the next begin closes
	// the attempt UNKNOWN, with the order's moves, and sends nothing.
	again := begin(t, s, store.AttemptRequest{CallbackURL: "http://b/cb"})
	assert.False(t, again.Send)
	assert.Equal(t, b.Attempt.No, again.Attempt.No)
	assert.Equal(t, store.OutcomeUnknown, again.Attempt.Outcome)
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status)
	assert.Equal(t, status.PaymentUnknown, o.PaymentStatus)

	granted := begin(t, s, store.AttemptRequest{Grant: "resend-1", CallbackURL: "http://b/cb"})
	require.True(t, granted.Send, "the workflow authorised one re-send")
	assert.Equal(t, 2, granted.Attempt.No)
	assert.Equal(t, "http://a/cb", granted.CallbackURL, "every create of the order carries the first one's callback URL")
	finish(t, s, 2, store.OutcomeUnknown, "")
	// The same grant, retried, reports the answer it got.
	retried := begin(t, s, store.AttemptRequest{Grant: "resend-1"})
	assert.False(t, retried.Send)
	assert.Equal(t, 2, retried.Attempt.No)
	assert.True(t, begin(t, s, store.AttemptRequest{Grant: "resend-2", Limit: 3}).Send)
	assert.False(t, begin(t, s, store.AttemptRequest{Grant: "resend-3", Limit: 3}).Send, "the limit holds for grants too")
}

// After a create whose outcome is unknown, whether the next one may go out
// depends only on the idempotency keys of the two.
func TestAfterAnUnknownCreate(t *testing.T) {
	t.Parallel()
	type next struct {
		req  store.AttemptRequest
		send bool
		why  string
	}
	for _, tc := range []struct {
		name  string
		first store.AttemptRequest
		then  []next
	}{
		{name: "AKeyedUnknownCreateMayBeSentAgainWithTheSameKey", first: store.AttemptRequest{IdempotencyKey: "k"}, then: []next{
			{store.AttemptRequest{}, false, "without the key the gateway would take it as new"},
			{store.AttemptRequest{IdempotencyKey: "k"}, true, "the same key"},
		}},
		{name: "WithoutKeyAKeyedCreateIsNotSent", first: store.AttemptRequest{}, then: []next{
			{store.AttemptRequest{IdempotencyKey: "k"}, false, "the gateway cannot match a key to the unkeyed create"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := reservedOrder(t)
			b := begin(t, s, tc.first)
			finish(t, s, b.Attempt.No, store.OutcomeUnknown, "")
			for _, n := range tc.then {
				assert.Equal(t, n.send, begin(t, s, n.req).Send, n.why)
			}
		})
	}
}

func TestConcurrentAttemptsSendAtMostOne(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	var mu sync.Mutex
	sent := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := s.BeginAttempt(ctx, store.AttemptRequest{OrderID: "o1"})
			if err != nil {
				t.Errorf("unexpected: %v", err)
				return
			}
			if b.Send {
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, sent, "one create, the rest found it in flight")
	attempts, err := s.Attempts(ctx, "o1")
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, store.OutcomeUnknown, attempts[0].Outcome, "closed by the first begin that found it in flight")
}

func TestBeginAttemptRefusesAMissingOrFinalOrder(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	_, err := s.BeginAttempt(ctx, store.AttemptRequest{OrderID: "ghost"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderCancelled, Reservation: store.ReleaseReservation, Cause: "x"}))
	_, err = s.BeginAttempt(ctx, store.AttemptRequest{OrderID: "o1"})
	require.ErrorIs(t, err, store.ErrIllegalTransition)
}

// An UNKNOWN create (which may be charging at the gateway) followed by an
// UNREACHABLE one must not let a create without the UNKNOWN one's key go
// out. Here --idempotency-keys was switched off between tries (a rolling
// config change).
func TestAnUnreachableCreateDoesNotClearAnEarlierUnknownOne(t *testing.T) {
	t.Parallel()
	s, _ := reservedOrder(t)
	const key = "payguard-order-o1"
	b := begin(t, s, store.AttemptRequest{IdempotencyKey: key, Limit: 5})
	require.True(t, b.Send)
	finish(t, s, 1, store.OutcomeUnknown, "") // read timeout: #1 may have created a transaction
	b = begin(t, s, store.AttemptRequest{IdempotencyKey: key, Limit: 5})
	require.True(t, b.Send, "same key: the gateway deduplicates")
	finish(t, s, 2, store.OutcomeUnreachable, "")

	b = begin(t, s, store.AttemptRequest{Limit: 5}) // no key, no grant
	assert.False(t, b.Send, "#1 may have reached the gateway and nothing authorised sending past it without its key")

	// A refusal after it proves nothing either: the payment is UNKNOWN, not FAILED.
	b = begin(t, s, store.AttemptRequest{IdempotencyKey: key, Limit: 5})
	require.True(t, b.Send)
	assert.True(t, b.Unresolved)
	require.NoError(t, s.FinishAttempt(context.Background(), store.Answer{OrderID: "o1", No: 3, Outcome: store.OutcomeRejected, Reason: "LIMIT"}))
	o, err := s.GetOrder(context.Background(), "o1")
	require.NoError(t, err)
	assert.Equal(t, status.PaymentUnknown, o.PaymentStatus)
	// A grant (the gateway knew nothing of the order after the grace
	// period) clears the unknown ones: the refusal is then the answer.
	b = begin(t, s, store.AttemptRequest{Grant: "resend-1", Limit: 5})
	assert.False(t, b.Send)
	assert.False(t, b.Unresolved)
	assert.Equal(t, store.OutcomeRejected, b.Attempt.Outcome)
}

// FinishAttempt takes the order's row lock before it touches the attempt,
// as BeginAttempt does (order, then attempts, in closeLost): when a retried
// create's BeginAttempt and the first try's FinishAttempt meet on one order,
// the opposite order would deadlock them, and PostgreSQL fail one after a
// second. Here the order is held locked while FinishAttempt runs: it must
// wait with the attempt row still free.
func TestFinishAttemptTakesTheOrderLockBeforeTheAttempts(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{})
	release := testenv.HoldRows(t, s.Pool(), `SELECT 1 FROM orders WHERE order_id = 'o1' FOR UPDATE`)

	finished := finishBehindLock(t, s, store.Answer{OrderID: "o1", No: b.Attempt.No, Outcome: store.OutcomeAccepted, TransactionKey: "tx1"})
	probe, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = probe.Exec(ctx, `SELECT 1 FROM payment_attempts WHERE order_id = 'o1' FOR UPDATE NOWAIT`)
	assert.NoError(t, err, "the attempt row is not locked while FinishAttempt waits for the order")
	require.NoError(t, probe.Rollback(ctx))

	release()
	require.NoError(t, <-finished)
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, o.Status)
	assert.Equal(t, "tx1", o.TransactionKey)
}

// finishBehindLock records a in the background, once the test holds the
// order's lock, and returns when FinishAttempt provably waits for a lock.
func finishBehindLock(t *testing.T, s *store.Store, a store.Answer) <-chan error {
	t.Helper()
	finished := make(chan error, 1)
	go func() { finished <- s.FinishAttempt(context.Background(), a) }()
	testenv.WaitLockWaiters(t, s.Pool(), 1, "", "FinishAttempt waits for the order's lock")
	return finished
}

// While FinishAttempt waits for the order's lock, the holder closes the
// attempt UNKNOWN as closeLost does, and commits: the waiting answer then
// finds no attempt SENDING. A different answer is refused and moves
// nothing; the same one is a no-op.
func TestFinishAttemptAfterTheAttemptWasClosedUnderIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		outcome string
		refused bool
	}{{store.OutcomeAccepted, true}, {store.OutcomeUnknown, false}} {
		t.Run(c.outcome, func(t *testing.T) {
			t.Parallel()
			s, ctx := reservedOrder(t)
			b := begin(t, s, store.AttemptRequest{})
			holder, err := s.Pool().Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = holder.Rollback(ctx) }()
			_, err = holder.Exec(ctx, `SELECT 1 FROM orders WHERE order_id = 'o1' FOR UPDATE`)
			require.NoError(t, err)

			finished := finishBehindLock(t, s, store.Answer{OrderID: "o1", No: b.Attempt.No, Outcome: c.outcome, TransactionKey: "tx1"})
			_, err = holder.Exec(ctx, `SET LOCAL lock_timeout = '5s'`)
			require.NoError(t, err)
			_, err = holder.Exec(ctx, `UPDATE payment_attempts SET state = 'ANSWERED', outcome = 'UNKNOWN', answered_at = clock_timestamp(),
				detail = 'closed under FinishAttempt' WHERE order_id = 'o1' AND state = 'SENDING'`)
			require.NoError(t, err, "the waiting FinishAttempt holds no attempt row")
			require.NoError(t, holder.Commit(ctx))

			err = <-finished
			if c.refused {
				var te *store.TransitionError
				require.ErrorAs(t, err, &te)
				assert.Equal(t, "UNKNOWN", te.From)
			} else {
				assert.NoError(t, err)
			}
			as, err := s.Attempts(ctx, "o1")
			require.NoError(t, err)
			require.Len(t, as, 1)
			assert.Equal(t, store.OutcomeUnknown, as[0].Outcome)
			assert.Empty(t, as[0].TransactionKey, "the refused answer's key is not recorded")
			o, err := s.GetOrder(ctx, "o1")
			require.NoError(t, err)
			assert.Equal(t, status.OrderRequesting, o.Status, "FinishAttempt moved nothing")
		})
	}
}

// A re-send granted after an unknown create and then refused leaves the
// payment UNKNOWN: the lookup behind the grant may have come before the
// gateway listed the first create's transaction, so the workflow searches
// before it fails the order, and a SUCCESS it finds must still settle.
func TestARefusedReSendAfterAnUnknownCreateLeavesThePaymentUnknown(t *testing.T) {
	t.Parallel()
	s, ctx := reservedOrder(t)
	b := begin(t, s, store.AttemptRequest{})
	finish(t, s, b.Attempt.No, store.OutcomeUnknown, "")
	b = begin(t, s, store.AttemptRequest{Grant: "resend-1"})
	require.True(t, b.Send, "the grant authorises the re-send")
	require.NoError(t, s.FinishAttempt(ctx, store.Answer{OrderID: "o1", No: b.Attempt.No, Outcome: store.OutcomeRejected, Reason: "LIMIT"}))
	o, err := s.GetOrder(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, status.PaymentUnknown, o.PaymentStatus, "a refused re-send is no proof the order failed")
	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "o1", Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
		TransactionKey: "tx1", Cause: "the first create's transaction found SUCCESS"}))
}
