package activities_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Classify is where a refund is decided: hunt for a refund of a legitimate
// charge or of money never taken.
func TestClassify(t *testing.T) {
	tx := func(key, st string) gateway.Transaction {
		return gateway.Transaction{OrderID: "o1", TransactionKey: key, Status: st, Amount: 5000}
	}
	cheap := func(key, st string) gateway.Transaction {
		return gateway.Transaction{OrderID: "o1", TransactionKey: key, Status: st, Amount: 1}
	}
	order := func(st status.Order, reservation, key string) store.Order {
		return store.Order{OrderID: "o1", Status: st, Reservation: reservation, TransactionKey: key, Amount: 5000}
	}
	refunded := func() store.Order {
		o := order(status.OrderConfirmed, store.ReservationReturned, "k1")
		o.PaymentStatus = status.PaymentRefunded
		return o
	}
	type want struct{ finding, action, key string }
	cases := []struct {
		name  string
		order store.Order
		txs   []gateway.Transaction
		want  []want
	}{
		{"confirmed and paid: nothing", order(status.OrderConfirmed, store.ReservationCommitted, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess)}, nil},
		{"confirmed, other charge failed: nothing", order(status.OrderConfirmed, store.ReservationCommitted, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess), tx("k2", gateway.StatusFailed)}, nil},
		{"confirmed with a second SUCCESS: refund the other only", order(status.OrderConfirmed, store.ReservationCommitted, "k1"),
			[]gateway.Transaction{tx("k2", gateway.StatusSuccess), tx("k1", gateway.StatusSuccess)},
			[]want{{activities.FindingSecondSuccess, activities.ActionRefund, "k2"}}},
		{"confirmed, own FAILED, another SUCCESS: flag, refund nothing", order(status.OrderConfirmed, store.ReservationCommitted, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusFailed), tx("k2", gateway.StatusSuccess)},
			[]want{{activities.FindingConfirmedUnpaid, activities.ActionFlag, "k1"}}},
		{"confirmed, gateway knows nothing: flag", order(status.OrderConfirmed, store.ReservationCommitted, "k1"), nil,
			[]want{{activities.FindingConfirmedUnpaid, activities.ActionFlag, "k1"}}},
		{"cancelled with a SUCCESS: refund", order(status.OrderCancelled, store.ReservationReleased, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess)}, []want{{activities.FindingLateSuccess, activities.ActionRefund, "k1"}}},
		{"failed with a SUCCESS on an unknown key: refund", order(status.OrderFailed, store.ReservationReleased, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusFailed), tx("k9", gateway.StatusSuccess)},
			[]want{{activities.FindingLateSuccess, activities.ActionRefund, "k9"}}},
		{"rejected with a SUCCESS: refund", order(status.OrderRejected, "", ""),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess)}, []want{{activities.FindingLateSuccess, activities.ActionRefund, "k1"}}},
		{"cancelled and cancelled: nothing", order(status.OrderCancelled, store.ReservationReleased, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusCancelled)}, nil},
		{"another order's SUCCESS is not ours", order(status.OrderCancelled, store.ReservationReleased, "k1"),
			[]gateway.Transaction{{OrderID: "o2", TransactionKey: "x", Status: gateway.StatusSuccess}}, nil},
		{"confirmed, a SUCCESS of another amount: flag it, refund nothing", order(status.OrderConfirmed, store.ReservationCommitted, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess), cheap("k2", gateway.StatusSuccess)},
			[]want{{activities.FindingOtherAmount, activities.ActionFlag, "k2"}}},
		{"cancelled, a SUCCESS of another amount: flag it, refund nothing", order(status.OrderCancelled, store.ReservationReleased, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusCancelled), cheap("k2", gateway.StatusSuccess)},
			[]want{{activities.FindingOtherAmount, activities.ActionFlag, "k2"}}},
		{"confirmed on a charge of another amount: flag it, conclude nothing else", order(status.OrderConfirmed, store.ReservationCommitted, "k2"),
			[]gateway.Transaction{cheap("k2", gateway.StatusSuccess), tx("k3", gateway.StatusSuccess)},
			[]want{{activities.FindingOtherAmount, activities.ActionFlag, "k2"}}},
		{"cancelled, stock held: release", order(status.OrderCancelled, store.ReservationHeld, ""), nil,
			[]want{{activities.FindingReservationHeld, activities.ActionRelease, ""}}},
		{"confirmed and refunded at the customer's request: nothing", refunded(),
			[]gateway.Transaction{tx("k1", gateway.StatusCancelled)}, nil},
		{"confirmed and refunded, a SUCCESS left: refund it", refunded(),
			[]gateway.Transaction{tx("k1", gateway.StatusCancelled), tx("k2", gateway.StatusSuccess)},
			[]want{{activities.FindingSecondSuccess, activities.ActionRefund, "k2"}}},
		{"confirmed and refunded, own SUCCESS: left alone (the refund records only what the gateway cancelled)", refunded(),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess)}, nil},
		{"confirmed, stock held: commit", order(status.OrderConfirmed, store.ReservationHeld, "k1"),
			[]gateway.Transaction{tx("k1", gateway.StatusSuccess)}, []want{{activities.FindingReservationHeld, activities.ActionCommit, ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []want
			for _, f := range activities.Classify(c.order, c.txs) {
				got = append(got, want{f.Finding, f.Action, f.TransactionKey})
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// A refund finding reports the charge's amount, also when it was found by
// a lookup by order, whose lines carry none: the order's.
func TestARefundFindingReportsTheAmount(t *testing.T) {
	o := store.Order{OrderID: "o1", Status: status.OrderCancelled, Reservation: store.ReservationReleased, Amount: 5000}
	byOrder := gateway.Transaction{OrderID: "o1", TransactionKey: "k1", Status: gateway.StatusSuccess} // Amount 0
	findings := activities.Classify(o, []gateway.Transaction{byOrder})
	if assert.Len(t, findings, 1) {
		assert.Equal(t, activities.ActionRefund, findings[0].Action)
		assert.EqualValues(t, 5000, findings[0].Amount)
	}
}
