package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/store"
)

// A sender stalled between recording its create SENDING and sending it (a
// paused VM) must not send it when it resumes past the send window: the
// next try has closed it UNKNOWN by then, and a lookup that finds nothing
// may have granted a re-send, beside which it would be a second charge.
// The stall is the create's record held on a lock past the window; the
// create is then closed as unreachable, nothing reaches the gateway, and
// the error is the one a connect error gives: safe to retry.
func TestACreateThatStalledPastTheSendWindowIsNotSent(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	orderID := testenv.ID("stalled")
	r.reserve(t, orderID)
	release := testenv.BlockWrites(t, r.store.Pool(), "INSERT", "payment_attempts")
	done := make(chan error, 1)
	go func() {
		_, err := r.env.ExecuteActivity(r.acts.RequestPayment, request(orderID))
		done <- err
	}()
	testenv.WaitLockWaiters(t, r.store.Pool(), 1, "advisory", "the create's BeginAttempt")
	<-time.After(activities.SendWindow + 200*time.Millisecond) // the stall
	release()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled create did not return")
	}
	kind, retryable := appError(t, err)
	assert.Equal(t, activities.ErrGatewayUnreachable, kind, "%v", err)
	assert.True(t, retryable, "nothing was sent: safe to retry")
	list := r.attempts(t, orderID)
	require.Len(t, list, 1)
	assert.Equal(t, store.OutcomeUnreachable, list[0].Outcome)
	assert.Contains(t, list[0].Detail, "stalled")
	assert.Zero(t, r.createsCalled(), "the client sent no create")
	found, err := r.client.PaymentsByOrder(context.Background(), orderID)
	require.NoError(t, err)
	assert.Empty(t, found.Transactions, "the gateway has no transaction of the order")
}
