package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/workflows"
)

// MaxBodyBytes bounds a request body, as the worker bounds a callback's.
const MaxBodyBytes = 64 << 10

// Headers the API reads and writes.
const (
	HeaderUser           = "X-USER-ID"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
	// MaxIdempotencyKeyLen bounds a key (a UUID is 36).
	MaxIdempotencyKeyLen = 255
)

// readJSON reads a whole body of at most MaxBodyBytes into v, refusing
// unknown fields and trailing data. The problem it returns, when not nil,
// is the answer: 413 too large, 408 sent too slowly (the server's read
// timeout), 400 otherwise.
func readJSON(w http.ResponseWriter, r *http.Request, v any) *Problem {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		p := problem(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body over %d bytes", MaxBodyBytes))
		return &p
	case errors.Is(err, os.ErrDeadlineExceeded):
		p := problem(http.StatusRequestTimeout, CodeTimeout, "the request body did not arrive in time")
		return &p
	case err != nil:
		p := problem(http.StatusBadRequest, CodeInvalid, "cannot read the request body: "+err.Error())
		return &p
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		p := problem(http.StatusBadRequest, CodeInvalid, "request body is not the expected JSON: "+err.Error())
		return &p
	}
	if dec.More() {
		p := problem(http.StatusBadRequest, CodeInvalid, "request body holds more than one JSON value")
		return &p
	}
	return nil
}

// OrderRequest is POST /api/v1/orders's body.
type OrderRequest struct {
	OrderID   string `json:"orderId,omitempty"`
	ProductID string `json:"productId"`
	Quantity  int64  `json:"quantity"`
	Amount    int64  `json:"amount"`
	CardType  string `json:"cardType"`
	CardNo    string `json:"cardNo"`
	// Deadline is a Go duration ("10m"); workflows.DefaultDeadline when
	// empty.
	Deadline string `json:"deadline,omitempty"`
}

// input checks the request and the customer's id, and returns the
// workflow input under orderID; the error names the field at fault.
func (o OrderRequest) input(userID, orderID string) (workflows.PaymentInput, error) {
	if o.OrderID != "" {
		if err := ids.CheckNewOrder(o.OrderID); err != nil {
			return workflows.PaymentInput{}, fmt.Errorf("orderId: %w", err)
		}
	}
	deadline := workflows.DefaultDeadline
	if o.Deadline != "" {
		d, err := time.ParseDuration(o.Deadline)
		if err != nil || d <= 0 || d > workflows.MaxDeadline {
			return workflows.PaymentInput{}, fmt.Errorf("deadline must be a duration such as 10m, positive and at most %s, got %q", workflows.MaxDeadline, o.Deadline)
		}
		deadline = d
	}
	switch {
	case userID == "":
		return workflows.PaymentInput{}, fmt.Errorf("the %s header naming the customer is required", HeaderUser)
	case o.ProductID == "":
		return workflows.PaymentInput{}, errors.New("productId is required")
	case o.Quantity <= 0:
		return workflows.PaymentInput{}, fmt.Errorf("quantity must be at least 1, got %d", o.Quantity)
	case o.Amount <= 0:
		return workflows.PaymentInput{}, fmt.Errorf("amount must be positive (minor units), got %d", o.Amount)
	}
	for _, c := range []struct {
		name string
		err  error
	}{{HeaderUser, ids.CheckUser(userID)}, {"productId", ids.CheckProduct(o.ProductID)}, {"card", gateway.CheckCard(o.CardType, o.CardNo)}} {
		if c.err != nil {
			if c.name == "card" {
				return workflows.PaymentInput{}, c.err // it names its field
			}
			return workflows.PaymentInput{}, fmt.Errorf("%s: %w", c.name, c.err)
		}
	}
	return workflows.PaymentInput{OrderID: orderID, ProductID: o.ProductID, Quantity: o.Quantity, Amount: o.Amount, UserID: userID,
		CardType: o.CardType, CardNo: o.CardNo, Deadline: deadline}, nil
}

// fingerprint identifies a request under an Idempotency-Key: the body as
// decoded (so key order and spacing do not matter) and the customer.
func (o OrderRequest) fingerprint(userID string) []byte {
	body, _ := json.Marshal(o)
	sum := sha256.Sum256(append([]byte(userID+"\n"), body...))
	return sum[:]
}

// checkIdempotencyKey holds a key to printable ASCII of bounded length.
func checkIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("%s must be at most %d characters, got %d", HeaderIdempotencyKey, MaxIdempotencyKeyLen, len(key))
	}
	if strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return fmt.Errorf("%s must be printable ASCII without spaces", HeaderIdempotencyKey)
	}
	return nil
}
