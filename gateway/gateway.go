// Package gateway is payguard's client for a payment gateway speaking the API
// of docs/design.md §4 (pgsim serves it), with the callback signature scheme.
//
// Its errors carry the one distinction that matters for money (docs/design.md §1):
//
//   - ErrUnreachable: the request provably never reached the gateway (no
//     connection was ever made: dial refused, DNS, dial timeout, TLS
//     handshake). Sending it again is safe.
//   - ErrOutcomeUnknown: the request was (or may have been) written and no
//     definitive answer came back (read timeout, reset, EOF, 5xx). The
//     gateway may be charging the card right now.
//   - ErrRejected: the gateway answered 4xx. Definitive; see *Error.Code.
//   - ErrInvalidRequest: the client refused to build the request — an id
//     outside payguard's rule (package ids) or a header value HTTP cannot
//     carry. Nothing was sent and no connection was opened. It is our bug,
//     never news about the gateway: not an outage, and a retry fails the
//     same way.
package gateway

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Error classes, for errors.Is.
var (
	ErrUnreachable    = errors.New("gateway unreachable")
	ErrOutcomeUnknown = errors.New("gateway outcome unknown")
	ErrRejected       = errors.New("gateway rejected the request")
	ErrInvalidRequest = errors.New("invalid request, never sent")
)

// Error is a failed gateway call with its class.
type Error struct {
	Class      error  // ErrUnreachable, ErrOutcomeUnknown, ErrRejected or ErrInvalidRequest
	Op         string // "create", "lookup", "lookup-by-order", "cancel"
	StatusCode int    // the HTTP status, when an answer came back
	Code       string // the gateway's error code, when it sent one
	Message    string
	Err        error // the transport error, when there was one
}

// Error says what failed, its class, and the answer or transport error.
func (e *Error) Error() string {
	switch {
	case e.StatusCode != 0:
		return fmt.Sprintf("%s: %s: HTTP %d %s %s", e.Op, e.Class, e.StatusCode, e.Code, e.Message)
	case e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Op, e.Class, e.Err)
	default:
		return fmt.Sprintf("%s: %s", e.Op, e.Class)
	}
}

// Is matches the error's class.
func (e *Error) Is(target error) bool { return target == e.Class }

// Unwrap exposes the transport error.
func (e *Error) Unwrap() error { return e.Err }

// Transaction statuses.
const (
	StatusPending   = "PENDING"
	StatusSuccess   = "SUCCESS"
	StatusFailed    = "FAILED"
	StatusCancelled = "CANCELLED"
)

// Card types the gateway accepts.
var CardTypes = []string{"SAMSUNG", "KB", "HYUNDAI"}

// CheckCard checks a card as the gateway does: its type one of CardTypes,
// its number of CardNoPattern's form. The message shows no more of the
// number than MaskCardNo does.
func CheckCard(cardType, cardNo string) error {
	if !slices.Contains(CardTypes, cardType) {
		return fmt.Errorf("cardType must be one of %s, got %q", strings.Join(CardTypes, ", "), cardType)
	}
	if !CardNoPattern.MatchString(cardNo) {
		return fmt.Errorf("cardNo must look like dddd-dddd-dddd-dddd, got %d characters ending %s", len(cardNo), MaskCardNo(cardNo))
	}
	return nil
}

// CardNoPattern is the card number format the gateway accepts, which the
// starter checks before an order starts and pgsim enforces.
var CardNoPattern = regexp.MustCompile(`^\d{4}-\d{4}-\d{4}-\d{4}$`)

// MaskCardNo is how a card number appears anywhere but the gateway request
// itself — logs, activity summaries, errors, command output: its last four
// digits only ("****1451"), whatever its format, so even a mistyped number
// is not printed in full. The one owner of card masking.
func MaskCardNo(cardNo string) string {
	digits := make([]byte, 0, len(cardNo))
	for i := 0; i < len(cardNo); i++ {
		if c := cardNo[i]; c >= '0' && c <= '9' {
			digits = append(digits, c)
		}
	}
	if len(digits) < 8 { // too short to show four digits and hide the rest
		return "****"
	}
	return "****" + string(digits[len(digits)-4:])
}

// CreateRequest is the body of POST /api/v1/payments.
type CreateRequest struct {
	OrderID     string `json:"orderId"`
	Amount      int64  `json:"amount"`
	CardType    string `json:"cardType"`
	CardNo      string `json:"cardNo"`
	CallbackURL string `json:"callbackUrl"`
}

// Created is the answer to a create; OrderID is the request's.
type Created struct {
	TransactionKey string `json:"transactionKey"`
	OrderID        string `json:"orderId"`
	Status         string `json:"status"`
}

// Transaction is a payment as payguard knows it from the gateway's answers
// and callbacks (TransactionInfo and TransactionSummary are the wire forms).
type Transaction struct {
	TransactionKey string `json:"transactionKey"`
	OrderID        string `json:"orderId"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
}

// OrderTransactions is the answer to a lookup by order id (OrderInfo.OrderTransactions).
type OrderTransactions struct {
	OrderID      string        `json:"orderId"`
	Transactions []Transaction `json:"transactions"`
}

// DevSecret signs callbacks when GATEWAY_SECRET is unset. It is public, so
// the worker takes it only while its callback endpoint listens on loopback
// (with a warning) and refuses to start with it anywhere else.
const DevSecret = "payguard-dev-secret"
