// Package status names the statuses of an order and of its payment (docs/design.md §8)
// and which of them are final. It is shared by the store, the workflow and
// the CLI, so the words a user sees are the same everywhere.
package status

import "slices"

// Order is where an order stands.
type Order string

// Order statuses: three while in flight, four final.
const (
	OrderReserving  Order = "RESERVING"
	OrderRequesting Order = "REQUESTING"
	OrderPending    Order = "PENDING"
	OrderConfirmed  Order = "CONFIRMED"
	OrderFailed     Order = "FAILED"
	OrderCancelled  Order = "CANCELLED"
	OrderRejected   Order = "REJECTED"
)

// FinalOrders are the final order statuses, in the order reports list them.
var FinalOrders = []Order{OrderConfirmed, OrderFailed, OrderCancelled, OrderRejected}

// Final reports whether the order has reached an end it never leaves.
func (s Order) Final() bool {
	return slices.Contains(FinalOrders, s)
}

// Payment is what payguard knows of the charge at the gateway.
type Payment string

// Payment statuses.
const (
	PaymentRequested Payment = "REQUESTED" // a create is being sent
	PaymentPending   Payment = "PENDING"   // the gateway holds a transaction, not yet decided
	PaymentUnknown   Payment = "UNKNOWN"   // a create may or may not have reached the gateway
	PaymentSuccess   Payment = "SUCCESS"
	PaymentFailed    Payment = "FAILED"
	PaymentCancelled Payment = "CANCELLED"
	PaymentRefunded  Payment = "REFUNDED"
)
