package httpapi

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem details answer. Code names the problem
// for a program (the worker's callback answers use the same words); the
// order's id and status travel with a problem about an order.
type Problem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail,omitempty"`
	Code        string `json:"code"`
	OrderID     string `json:"orderId,omitempty"`
	OrderStatus string `json:"orderStatus,omitempty"`
}

// ProblemType is every problem's type: the status and Code say which.
const ProblemType = "about:blank"

// Codes of the problems the API answers.
const (
	CodeInvalid          = "INVALID_REQUEST"
	CodeTooLarge         = "PAYLOAD_TOO_LARGE"
	CodeTimeout          = "REQUEST_TIMEOUT"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeNotFound         = "NOT_FOUND"
	CodeUnknownProduct   = "UNKNOWN_PRODUCT"
	CodeOutOfStock       = "OUT_OF_STOCK"
	CodeAlreadyPlaced    = "ALREADY_PLACED"
	CodeAlreadyEnded     = "ALREADY_ENDED"
	CodeNotRefundable    = "NOT_REFUNDABLE"
	CodeKeyInFlight      = "IDEMPOTENCY_KEY_IN_FLIGHT"
	CodeKeyMismatch      = "IDEMPOTENCY_KEY_REUSED"
	CodeUnavailable      = "UNAVAILABLE"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
)

func problem(status int, code, detail string) Problem {
	return Problem{Type: ProblemType, Title: http.StatusText(status), Status: status, Detail: detail, Code: code}
}

// ProblemContentType is the media type of a problem (RFC 9457 §3).
const ProblemContentType = "application/problem+json"

func writeProblem(w http.ResponseWriter, p Problem) {
	body, _ := json.Marshal(p)
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	writeBody(w, status, append(body, '\n'))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
