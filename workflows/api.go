package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Names other processes rely on (docs/design.md §2).
const (
	PaymentWorkflowName = "PaymentWorkflow"
	RefundWorkflowName  = activities.RefundWorkflowType
	CallbackSignal      = "gateway-callback"
	// LookupHintSignal carries a LookupHint: an unsigned callback, which the
	// worker in --callback-auth lookup mode may not believe, only pass on.
	LookupHintSignal = "gateway-lookup-hint"
	StateQuery       = "state"
	// ReconcileWorkflowName is the sweep (reconcile.go), RecoverWorkflowName
	// the recovery of an order whose workflow is gone (recover.go).
	ReconcileWorkflowName = "ReconcileWorkflow"
	RecoverWorkflowName   = "RecoverWorkflow"
	// SummaryQuery answers a sweep's ReconcileResult so far.
	SummaryQuery    = "summary"
	DefaultDeadline = 10 * time.Minute
	// MaxDeadline bounds an order's life: polling at most every PollMax, a
	// day of it stays far inside Temporal's history limits.
	MaxDeadline = 24 * time.Hour
)

// Callback is CallbackSignal's payload. Anyone who can signal the
// namespace can send one, so the workflow believes only Signed, the
// callback as the gateway signed it, once a local activity has verified it
// (activities.VerifyCallback); the Transaction beside it is what the
// sender claims, for the UI and the logs.
type Callback struct {
	gateway.Transaction
	Signed *gateway.SignedCallback `json:"signed,omitempty"`
}

// Workflows carries the worker's tuning into the workflows it registers.
type Workflows struct {
	tuning Tuning
}

// New returns the workflows with the given tuning.
func New(t Tuning) *Workflows { return &Workflows{tuning: t} }

// Search attributes the workflow keeps current, so the UI can filter orders
// by where they stand. The dev server must have them registered.
var (
	OrderStatusKey   = temporal.NewSearchAttributeKeyKeyword("OrderStatus")
	PaymentStatusKey = temporal.NewSearchAttributeKeyKeyword("PaymentStatus")
)

// PaymentWorkflowID is the id of an order's workflow: one order, one id, so a
// second start of the same order can never start a second payment.
func PaymentWorkflowID(orderID string) string { return "order-" + orderID }

// The sweep's defaults (docs/design.md §6, §10): the worker's flags and the
// starter read them here.
const (
	DefaultReconcileInterval = 5 * time.Minute
	DefaultReconcileWindow   = 24 * time.Hour
	DefaultReconcileRate     = 20.0 // gateway lookups a second
	// MinReconcileRate is the slowest pace a sweep may be given: a batch
	// heartbeats once per order (timeout 1 min) and must end within its
	// 30 min StartToClose, so a slower pace would time every batch out and
	// the sweep would retry it for ever, the schedule skipping every next one.
	MinReconcileRate      = 1.0
	DefaultReconcileBatch = 100 // orders per batch, one run each
)

// RecoverInput names the order to recover.
type RecoverInput struct {
	OrderID string `json:"orderId"`
}

// RefundWorkflowID names the refund of one late charge.
func RefundWorkflowID(orderID, transactionKey string) string {
	return "refund-" + orderID + "-" + transactionKey
}

// LookupHint says an unsigned callback arrived for the order. It decides
// nothing: the workflow looks the order up at the gateway now, and only the
// gateway's answer counts. Its fields are what the callback claimed, kept
// for the log and the choice of lookup.
type LookupHint struct {
	TransactionKey string `json:"transactionKey"`
	Status         string `json:"status"`
}

// PaymentInput is an order to pay for. Amount is in minor units.
type PaymentInput struct {
	OrderID   string        `json:"orderId"`
	ProductID string        `json:"productId"`
	Quantity  int64         `json:"quantity"`
	Amount    int64         `json:"amount"`
	UserID    string        `json:"userId"`
	CardType  string        `json:"cardType"`
	CardNo    string        `json:"cardNo"`
	Deadline  time.Duration `json:"deadline"` // from the start; DefaultDeadline when zero
}

// Lookup is the outcome of the latest status lookup.
type Lookup struct {
	At     time.Time `json:"at"`     // when the lookup was scheduled: it saw the gateway no earlier
	Result string    `json:"result"` // a gateway status, NOT_FOUND, UNAVAILABLE (breaker open) or ERROR
	Detail string    `json:"detail,omitempty"`
}

// State is what the `state` query answers and what the workflow returns.
type State struct {
	OrderID        string         `json:"orderId"`
	Status         status.Order   `json:"status"`
	PaymentStatus  status.Payment `json:"paymentStatus"`
	TransactionKey string         `json:"transactionKey"`
	Attempts       int            `json:"attempts"`
	LastLookup     *Lookup        `json:"lastLookup"`
	Deadline       time.Time      `json:"deadline"`
	Reason         string         `json:"reason,omitempty"`
	Anomalies      int            `json:"anomalies"`
}

// RefundInput refunds a charge that landed after its order gave up, or a
// CONFIRMED order's own at the customer's request (ReturnStock).
type RefundInput struct {
	OrderID        string `json:"orderId"`
	UserID         string `json:"userId,omitempty"` // the order's user, named in the cancel
	TransactionKey string `json:"transactionKey"`
	Amount         int64  `json:"amount"`
	Cause          string `json:"cause"`
	// MarkPayment sets the order's payment REFUNDED; false when the order is
	// CONFIRMED by another charge, which must keep its SUCCESS.
	MarkPayment bool `json:"markPayment"`
	// ReturnStock is a CONFIRMED order refunded in full at the customer's
	// request (POST /api/v1/orders/{id}/refund, starter refund): its payment
	// goes REFUNDED and its sold units are returned, in one step.
	ReturnStock bool `json:"returnStock,omitempty"`
}

// ErrNothingRefunded fails a customer's refund the gateway did not make.
const ErrNothingRefunded = "NothingRefunded"

// RefundOrderInput is the refund in full of a CONFIRMED order's own charge.
func RefundOrderInput(orderID, userID, transactionKey string, amount int64) RefundInput {
	return RefundInput{OrderID: orderID, UserID: userID, TransactionKey: transactionKey, Amount: amount,
		Cause: store.CauseCustomerRefund, MarkPayment: true, ReturnStock: true}
}

// Tuning are the worker's settings that shape the workflow (docs/design.md §6). The
// workflow reads them once through a side effect, so a worker restarted with
// other flags still replays the histories it already has.
type Tuning struct {
	RequestAttempts int           `json:"requestAttempts"` // creates per order, re-sends included; 0: until the deadline
	RequestTimeout  time.Duration `json:"requestTimeout"`  // StartToClose of one create: above the HTTP timeouts
	LookupTimeout   time.Duration `json:"lookupTimeout"`
	UnknownGrace    time.Duration `json:"unknownGrace"` // no transaction this long after a timed-out create: re-send
	// AnsweredGrace is the wait before the lookup that follows a create
	// the gateway answered 5xx (nothing in flight); twice it after a
	// re-send.
	AnsweredGrace time.Duration `json:"answeredGrace"`
	PollInitial   time.Duration `json:"pollInitial"`
	PollMax       time.Duration `json:"pollMax"`
}

// The worker's flag defaults for the tuning it passes the workflow; its
// flags and DefaultTuning both read them, so the two cannot drift apart.
const (
	DefaultRequestAttempts = 0 // bounded by the order's deadline alone
	DefaultUnknownGrace    = 10 * time.Second
	DefaultAnsweredGrace   = time.Second
	DefaultPollInitial     = 5 * time.Second
	DefaultPollMax         = time.Minute
)

// CallTimeout is the StartToClose timeout of one gateway call made with the
// given HTTP timeouts: above their sum, so the HTTP read timeout always fires
// first and the activity sees the gateway's own outcome.
func CallTimeout(connect, read time.Duration) time.Duration { return connect + read + 5*time.Second }

// NewTuning derives the workflow tuning from the worker's settings.
func NewTuning(connect, read time.Duration, requestAttempts int, unknownGrace, answeredGrace, pollInitial, pollMax time.Duration) Tuning {
	return Tuning{
		RequestAttempts: requestAttempts,
		RequestTimeout:  CallTimeout(connect, read),
		LookupTimeout:   CallTimeout(connect, read),
		UnknownGrace:    unknownGrace,
		AnsweredGrace:   answeredGrace,
		PollInitial:     pollInitial,
		PollMax:         pollMax,
	}
}

// AnsweredWait is the wait after a create the gateway answered 5xx in
// full before the lookup that may justify a re-send, once the order has
// had resends re-sends: AnsweredGrace for the first, then twice that, so a
// flaky gateway's 500s are re-sent until the deadline, one order's creates
// at least two graces apart (docs/design.md §1).
func (t Tuning) AnsweredWait(resends int) time.Duration {
	if resends == 0 {
		return t.AnsweredGrace
	}
	return 2 * t.AnsweredGrace
}

// DefaultTuning is the tuning a worker started with default flags passes.
func DefaultTuning() Tuning {
	return NewTuning(gateway.DefaultConnectTimeout, gateway.DefaultReadTimeout,
		DefaultRequestAttempts, DefaultUnknownGrace, DefaultAnsweredGrace, DefaultPollInitial, DefaultPollMax)
}
