package store_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// A CONFIRMED order refunded in full returns its stock once, a HELD
// reservation cannot be returned, and a refund the customer asked for is
// not a lost order while a refund of a late charge is.
func TestAReturnedReservationMakesItsUnitsAvailableOnce(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := t.Context()
	_, err := s.SetStock(ctx, "P1", 10)
	require.NoError(t, err)
	for _, id := range []string{"ret-1", "ret-2", "ret-3"} {
		_, err := s.Reserve(ctx, store.NewOrder{OrderID: id, ProductID: "P1", Quantity: 2, Amount: 100, UserID: "u"})
		require.NoError(t, err)
	}
	err = s.Advance(ctx, store.Change{OrderID: "ret-3", Payment: status.PaymentRefunded, Reservation: store.ReturnReservation, Cause: store.CauseCustomerRefund})
	assert.ErrorIs(t, err, store.ErrReservationSettled, "a HELD reservation is not returned")
	for _, id := range []string{"ret-1", "ret-2"} {
		require.NoError(t, s.Advance(ctx, store.Change{OrderID: id, Order: status.OrderConfirmed, Payment: status.PaymentSuccess, TransactionKey: "k-" + id,
			Reservation: store.CommitReservation, Cause: "charged"}))
	}
	refund := store.Change{OrderID: "ret-1", Payment: status.PaymentRefunded, Reservation: store.ReturnReservation, Cause: store.CauseCustomerRefund}
	require.NoError(t, s.Advance(ctx, refund))
	require.NoError(t, s.Advance(ctx, refund), "a repeat is a no-op")
	st, err := s.GetStock(ctx, "P1")
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 10, Available: 6, Reserved: 2, Sold: 2}, st)
	o, err := s.GetOrder(ctx, "ret-1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, o.Status)
	assert.Equal(t, status.PaymentRefunded, o.PaymentStatus)
	assert.Equal(t, store.ReservationReturned, o.Reservation)

	require.NoError(t, s.Advance(ctx, store.Change{OrderID: "ret-2", Payment: status.PaymentRefunded, Cause: "late SUCCESS refunded"}))
	outs, err := s.Outcomes(ctx, []string{"ret-1", "ret-2"})
	require.NoError(t, err)
	require.Len(t, outs, 2)
	assert.Empty(t, outs[0].Lost, "refunded at the customer's request")
	assert.Equal(t, store.LostRefunded, outs[1].Lost, "refunded for any other reason")
}
