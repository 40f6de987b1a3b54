// Package activities holds every side effect of a payment: stock in
// PostgreSQL, calls to the gateway, and the event log.
//
// The retry rule (docs/design.md §1) is decided here, because only the activity sees
// how a create failed. It returns a retryable GatewayUnreachable error only
// when the gateway provably never received the request; a create that may
// have reached it comes back as the non-retryable GatewayOutcomeUnknown, and
// a 4xx as GatewayRejected. Before sending, the create is recorded in
// Postgres, and its answer is recorded with the status change it means in
// one transaction. A retried activity that finds an answer already recorded
// (its worker died after recording it) reports that answer and sends
// nothing; one that finds a create sent and unanswered reports the outcome
// unknown.
//
// Status lookups go through the lookup breaker and creates through the
// request breaker (package breaker: the fleet's, or the process's own). An
// open lookup breaker is LookupUnavailable — "we cannot look right now" —
// which the workflow treats as no news, never as a failed payment; an open
// request breaker is RequestBreakerOpen, a create never attempted, retried
// when the breaker may let one through.
package activities

import (
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Error types that cross the activity boundary. Workflows match these
// strings, never Go type names.
const (
	ErrGatewayUnreachable    = "GatewayUnreachable"    // retryable: the gateway never saw the request
	ErrGatewayOutcomeUnknown = "GatewayOutcomeUnknown" // not retryable: it may be charging right now
	// ErrGatewayUnknownKeyed is an unknown outcome of a create that carried an
	// idempotency key the gateway honours: retrying it is safe.
	ErrGatewayUnknownKeyed = "GatewayOutcomeUnknownKeyed"
	ErrGatewayRejected     = "GatewayRejected"   // not retryable: a definitive 4xx
	ErrLookupUnavailable   = "LookupUnavailable" // benign: the lookup breaker is open
	// ErrRequestBreakerOpen is a create our own open request breaker did
	// not send: retryable (it never reached the gateway), with
	// NextRetryDelay set to when the breaker may let one through.
	ErrRequestBreakerOpen = "RequestBreakerOpen"
	// ErrCancelRequested is a create held, not sent, because its workflow
	// has an operator's cancel pending (Config.CancelRequested);
	// ErrCancelUnknown one held because the question failed. Both are
	// retryable: the workflow's cancel ends the hold.
	ErrCancelRequested = "CreateHeldForCancel"
	ErrCancelUnknown   = "CreateHeldCancelUnknown"
	// ErrDeadlinePassed: a create not sent because the order's deadline
	// passed; ErrGrantExpired: a re-send not sent because its grant lapsed.
	// Neither left; neither is retried.
	ErrDeadlinePassed = "CreateDeadlinePassed"
	ErrGrantExpired   = "ResendGrantExpired"
	ErrLookupFailed   = "LookupFailed" // retryable: a lookup got no definitive answer
	ErrOutOfStock     = "OutOfStock"
	ErrUnknownProduct = "UnknownProduct"
	ErrInvalidOrder   = "InvalidOrder"
	// ErrUnverifiedCallback: a callback signal the gateway did not sign
	// (VerifyCallback); the workflow ignores it.
	ErrUnverifiedCallback = "UnverifiedCallback"
	ErrIllegalTransition  = "IllegalTransition"
	// ErrGatewayNotSearched: CancelOrder found a create that may have reached
	// the gateway, which its caller did not search (SettleInput.Unsearched).
	ErrGatewayNotSearched = "GatewayNotSearched"
	// ErrRefundRefused: a refund the order's books do not call for (its
	// order still open, or the own charge of a CONFIRMED order without the
	// customer's request); nothing is sent to the gateway.
	ErrRefundRefused = "RefundRefused"
)

// RefundWorkflowType is the workflow type whose cancels refundAllowed
// checks against the books; workflows.RefundWorkflowName is this name.
const RefundWorkflowType = "RefundWorkflow"

// Event kinds a workflow records (EventInput.Kind) and reservation actions it
// asks Settle for (SettleInput.Reservation): the store's own values, named in
// the activities' contract so a workflow needs no store of its own.
const (
	KindAnomaly = store.KindAnomaly

	CommitReservation  = store.CommitReservation
	ReleaseReservation = store.ReleaseReservation
	ReturnReservation  = store.ReturnReservation
)

// ReserveInput opens an order and holds its stock.
type ReserveInput struct {
	OrderID   string `json:"orderId"`
	ProductID string `json:"productId"`
	Quantity  int64  `json:"quantity"`
	Amount    int64  `json:"amount"`
	UserID    string `json:"userId"`
	// Deadline is recorded with the order, so what stays open past it can
	// be counted from the database; zero in histories from before it.
	Deadline time.Time `json:"deadline,omitzero"`
}

// ReserveResult is the order as Reserve leaves it. A repeated Reserve finds
// the order as it stands — in a run of the workflow's first task again, with
// the creates an earlier run of it began, and what it settled — and then
// says whether one of those creates may have reached the gateway.
type ReserveResult struct {
	store.Order
	MaybeSent bool `json:"maybeSent,omitempty"`
	// Resends counts the order's creates sent under a grant (re-sends
	// after a create whose outcome was unknown): a run again (an
	// operator's reset to the first task) holds a FAILED after them for a
	// search by order id, as the run that sent them did, and names its
	// own grants after them.
	Resends int `json:"resends,omitempty"`
}

// RequestInput asks the gateway to charge the order.
type RequestInput struct {
	OrderID  string `json:"orderId"`
	Amount   int64  `json:"amount"`
	UserID   string `json:"userId"`
	CardType string `json:"cardType"`
	CardNo   string `json:"cardNo"`
	// Limit bounds the order's creates, counted in the database whatever
	// Temporal's attempt counter says; 0 is no bound.
	Limit int `json:"limit,omitempty"`
	// Grant authorises one create past an UNKNOWN one, after the gateway
	// knew no transaction of the order (store.AttemptRequest.Grant), until
	// GrantExpires.
	Grant        string    `json:"grant,omitempty"`
	GrantExpires time.Time `json:"grantExpires,omitzero"`
	// Deadline is the order's: no retry of the create is asked for after
	// it (the database refuses a create past it in any case).
	Deadline time.Time `json:"deadline,omitzero"`
}

// CreateRetry paces a create Temporal retries (the workflow's retry policy):
// an unreachable gateway, or a keyed create whose outcome is unknown. The
// activity asks for each retry itself (NextRetryDelay), on this schedule
// but never past the order's deadline, so the last try comes at the
// deadline and is refused there, rather than one backoff after it.
var CreateRetry = struct {
	Initial     time.Duration
	Coefficient float64
	Max         time.Duration
}{Initial: 500 * time.Millisecond, Coefficient: 2, Max: 10 * time.Second}

// createBackoff is the delay after the given try (1-based) on CreateRetry's
// schedule.
func createBackoff(try int) time.Duration {
	d := float64(CreateRetry.Initial)
	for i := 1; i < try && d < float64(CreateRetry.Max); i++ {
		d *= CreateRetry.Coefficient
	}
	return min(time.Duration(d), CreateRetry.Max)
}

// notAfter is when the create may no longer leave: the deadline, or the
// grant's lapse when sooner.
func (in RequestInput) notAfter() time.Time {
	if in.Grant != "" && !in.GrantExpires.IsZero() && (in.Deadline.IsZero() || in.GrantExpires.Before(in.Deadline)) {
		return in.GrantExpires
	}
	return in.Deadline
}

// RequestResult is an accepted create.
type RequestResult struct {
	TransactionKey string `json:"transactionKey"`
	Attempt        int    `json:"attempt"` // the Temporal attempt that got through
	// Attempts is the order's creates recorded in the database.
	Attempts int `json:"attempts,omitempty"`
}

// RequestFailure is the detail of a failed create's error.
type RequestFailure struct {
	Attempt  int    `json:"attempt"`
	Attempts int    `json:"attempts,omitempty"` // the order's creates recorded in the database
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
	// Answered: the gateway answered the create with a complete 5xx, so
	// nothing of it is in flight and a lookup soon after is proof.
	Answered bool `json:"answered,omitempty"`
}

// Transition is the detail of an ErrIllegalTransition refusal: the status
// move the store refused, and the status that stands.
type Transition struct {
	Entity string `json:"entity"` // "order" or "payment"
	From   string `json:"from"`
	To     string `json:"to"`
}

// LookupInput asks what the gateway knows: by transaction key when known,
// otherwise by order id.
type LookupInput struct {
	OrderID        string `json:"orderId"`
	TransactionKey string `json:"transactionKey,omitempty"`
	// UserID is the order's user, named in the lookup: a gateway that
	// scopes transactions by user finds nothing under another ("" is the
	// client's default user).
	UserID string `json:"userId,omitempty"`
}

// LookupResult lists the order's transactions at the gateway.
type LookupResult struct {
	Transactions []gateway.Transaction `json:"transactions"`
	// Others are transactions under the order's id of another amount: not
	// the order's (every create of it asks for its amount), so left out of
	// Transactions, and never deciding the order. The sweep flags them.
	Others []gateway.Transaction `json:"others,omitempty"`
}

// Unavailable is the detail of a LookupUnavailable error: when the breaker
// may let a lookup through (jitter included), the workflow's next poll.
type Unavailable struct {
	RetryAfter time.Duration `json:"retryAfter"`
}

// CancelInput cancels an order's transactions at the gateway.
type CancelInput struct {
	OrderID         string   `json:"orderId"`
	UserID          string   `json:"userId,omitempty"` // the order's user, as in LookupInput
	TransactionKeys []string `json:"transactionKeys,omitempty"`
	// SearchByOrder also cancels transactions the workflow never learned of,
	// found by order id: needed after an unknown create outcome.
	SearchByOrder bool `json:"searchByOrder,omitempty"`
	// Requested is a refund the customer asked for: not counted among the
	// charges refunded because their order could not keep them.
	Requested bool `json:"requested,omitempty"`
}

// CancelResult is what each cancel left behind.
type CancelResult struct {
	Transactions []gateway.Transaction `json:"transactions"`
	Refunded     int                   `json:"refunded"` // SUCCESS charges that the cancel refunded
	// SearchedAt is when the search by order id was made, by the
	// database's clock (zero without one): CancelOrder refuses if a create
	// was answered after it (SettleInput.SearchedAt).
	SearchedAt time.Time `json:"searchedAt,omitzero"`
}

// SettleInput moves an order, its payment and its reservation together.
type SettleInput struct {
	OrderID        string         `json:"orderId"`
	Order          status.Order   `json:"order,omitempty"`
	Payment        status.Payment `json:"payment,omitempty"`
	TransactionKey string         `json:"transactionKey,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Reservation    string         `json:"reservation,omitempty"` // "", CommitReservation, ReleaseReservation or ReturnReservation
	Cause          string         `json:"cause"`
	// Unsearched is CancelOrder's: the caller did not search the gateway by
	// order id, and is refused (ErrGatewayNotSearched) when a create of the
	// order may have reached it (store.Cancel).
	Unsearched bool `json:"unsearched,omitempty"`
	// SearchedAt is CancelOrder's: when the caller's search by order id was
	// made (CancelResult.SearchedAt). Refused (ErrGatewayNotSearched) when a
	// create was answered accepted or unknown after it (store.CancelCheck).
	SearchedAt time.Time `json:"searchedAt,omitzero"`
}

// EventInput records an anomaly or a note in the order's event log.
type EventInput struct {
	OrderID string         `json:"orderId"`
	Kind    string         `json:"kind"`
	Cause   string         `json:"cause"`
	Detail  map[string]any `json:"detail,omitempty"`
}
