package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/payguard/payguard/ids"
)

// DecodeCallback reads a callback body: the lookup's data (TransactionInfo),
// bare, as the gateway sends it.
func DecodeCallback(body []byte) (Transaction, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var info TransactionInfo
	if err := dec.Decode(&info); err != nil {
		return Transaction{}, fmt.Errorf("malformed callback: %v", err)
	}
	if dec.More() {
		return Transaction{}, errors.New("malformed callback: trailing data")
	}
	cb := info.Transaction()
	switch {
	case cb.OrderID == "" || cb.TransactionKey == "":
		return cb, errors.New("callback needs orderId and transactionKey")
	case cb.Amount <= 0:
		return cb, errors.New("callback amount must be positive")
	}
	// An id no order can have is refused here, not by the database later
	// (a NUL byte would be a 5xx the gateway retries for ever).
	if err := ids.CheckOrder(cb.OrderID); err != nil {
		return cb, fmt.Errorf("callback orderId: %w", err)
	}
	switch cb.Status {
	case StatusSuccess, StatusFailed, StatusPending, StatusCancelled:
	default:
		return cb, fmt.Errorf("callback status %q is not a gateway status", cb.Status)
	}
	return cb, nil
}

// SignedCallback is a callback as the gateway signed it: the body and its
// two headers. It travels to the order's workflow, which believes only
// what it can verify (Open), not what a signal says beside it.
type SignedCallback struct {
	Body      []byte `json:"body"`
	Timestamp string `json:"timestamp"`
	Signature string `json:"signature"`
}

// Open verifies the signature with secret and decodes the body. The
// timestamp is signed but not held to a tolerance here: the endpoint did
// that on arrival, and a workflow may read the callback much later (a
// worker down, a backlog); a genuine callback delivered twice says the same
// thing twice.
func (s SignedCallback) Open(secret []byte) (Transaction, error) {
	if err := checkSignature(secret, s.Timestamp, s.Signature, s.Body); err != nil {
		return Transaction{}, err
	}
	return DecodeCallback(s.Body)
}
