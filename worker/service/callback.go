package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// MaxCallbackBytes bounds a callback body (docs/design.md §4).
const MaxCallbackBytes = 64 << 10

// CallbackAnswer is the body of every answer of POST /callbacks/gateway.
type CallbackAnswer struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
}

type callbackHandler struct {
	store     *store.Store
	temporal  client.Client
	taskQueue string
	secret    []byte
	// lookupMode takes an unsigned callback as a hint (--callback-auth lookup).
	lookupMode bool
	metrics    *Metrics
	log        *slog.Logger
	now        func() time.Time
}

func (h *callbackHandler) answer(w http.ResponseWriter, code int, a CallbackAnswer) {
	h.metrics.Callback(code)
	writeJSON(w, code, a)
}

func (h *callbackHandler) refuse(w http.ResponseWriter, code int, errCode, msg string) {
	h.log.Warn("callback refused", "http_status", code, "code", errCode, "message", msg)
	h.answer(w, code, CallbackAnswer{Code: errCode, Message: msg})
}

// ServeHTTP checks size, signature and shape before anything else, so a
// forged, stale or oversized callback changes nothing.
func (h *callbackHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "callbacks are POSTed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCallbackBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		h.refuse(w, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("callback body over %d bytes", MaxCallbackBytes))
		return
	}
	if err != nil {
		h.refuse(w, http.StatusBadRequest, "BAD_REQUEST", "cannot read body")
		return
	}
	err = gateway.Verify(h.secret, r.Header.Get(gateway.HeaderTimestamp), r.Header.Get(gateway.HeaderSignature),
		body, h.now(), gateway.DefaultTolerance)
	if err != nil && h.lookupMode {
		h.hint(w, r, body)
		return
	}
	if err != nil {
		h.refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", err.Error())
		return
	}
	cb, order, ok := h.readOrder(w, r, body)
	if !ok {
		return
	}
	ctx := r.Context()
	if order.Status.Final() {
		h.settled(ctx, w, order, cb)
		return
	}
	// The workflow believes the signed body, not the signal (workflows.Callback).
	signed := &gateway.SignedCallback{Body: body, Timestamp: r.Header.Get(gateway.HeaderTimestamp), Signature: r.Header.Get(gateway.HeaderSignature)}
	err = h.temporal.SignalWorkflow(ctx, workflows.PaymentWorkflowID(cb.OrderID), "", workflows.CallbackSignal,
		workflows.Callback{Transaction: cb, Signed: signed})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// The workflow ended between our read and the signal: read again.
		if again, rerr := h.store.GetOrder(ctx, cb.OrderID); rerr == nil && again.Status.Final() {
			h.settled(ctx, w, again, cb)
			return
		}
		// Not final, yet no workflow runs for it: nothing can apply the
		// callback now. It is kept on the order's record for the operator
		// (and reconciliation), and the gateway is told to retry — a 200
		// would make it stop, and the answer would be lost.
		h.log.Error("callback for an order with no running workflow", "order_id", cb.OrderID, "status", cb.Status)
		_ = h.store.RecordEvent(ctx, store.Event{OrderID: cb.OrderID, Kind: store.KindCallback,
			Cause:  "callback not delivered: the order's workflow is not running",
			Detail: map[string]any{"transaction_key": cb.TransactionKey, "status": cb.Status, "order_status": string(order.Status)}})
	}
	if err != nil {
		h.log.Error("signal workflow", "order_id", cb.OrderID, "error", err.Error())
		h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "cannot reach the order's workflow; retry later")
		return
	}
	h.log.Info("callback accepted", "order_id", cb.OrderID, "transaction_key", cb.TransactionKey, "status", cb.Status)
	h.answer(w, http.StatusOK, CallbackAnswer{Accepted: true})
}

// readOrder decodes a callback and reads its order, answering the refusal
// itself (400, 404, 503) when it cannot.
func (h *callbackHandler) readOrder(w http.ResponseWriter, r *http.Request, body []byte) (gateway.Transaction, store.Order, bool) {
	cb, err := gateway.DecodeCallback(body)
	if err != nil {
		h.refuse(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return cb, store.Order{}, false
	}
	order, err := h.store.GetOrder(r.Context(), cb.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		h.refuse(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no order %q", cb.OrderID))
		return cb, order, false
	}
	if err != nil {
		h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "database unavailable; retry later")
		return cb, order, false
	}
	return cb, order, true
}

// settled handles a callback for an order that already ended: recorded, not
// applied; a SUCCESS that is not the order's own confirmed charge is money
// taken for nothing, so a refund starts (a workflow: durable until done).
func (h *callbackHandler) settled(ctx context.Context, w http.ResponseWriter, order store.Order, cb gateway.Transaction) {
	reason := fmt.Sprintf("order already %s", order.Status)
	detail := map[string]any{"transaction_key": cb.TransactionKey, "status": cb.Status, "order_status": string(order.Status)}
	// One of another amount is not the order's: left as the sweep leaves
	// it (flagged, money untouched), never refunded as the order's charge.
	otherAmount := cb.Amount != order.Amount
	refund := cb.Status == gateway.StatusSuccess && !otherAmount &&
		!(order.Status == status.OrderConfirmed && order.TransactionKey == cb.TransactionKey)
	if otherAmount {
		reason += fmt.Sprintf("; amount %d is not the order's %d: not its charge, left as it is", cb.Amount, order.Amount)
		detail["amount"], detail["order_amount"] = cb.Amount, order.Amount
	}
	if refund {
		in := workflows.RefundInput{OrderID: order.OrderID, UserID: order.UserID, TransactionKey: cb.TransactionKey, Amount: cb.Amount,
			Cause: "SUCCESS callback after the order was " + string(order.Status), MarkPayment: order.Status != status.OrderConfirmed}
		_, err := h.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.RefundWorkflowID(order.OrderID, cb.TransactionKey), TaskQueue: h.taskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			StaticSummary:         fmt.Sprintf("Refund late charge %s of %d for order %s", cb.TransactionKey, cb.Amount, order.OrderID),
		}, workflows.RefundWorkflowName, in)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err != nil && !errors.As(err, &started) && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			h.log.Error("start refund", "order_id", order.OrderID, "error", err.Error())
			h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "cannot start the refund; retry later")
			return
		}
		reason += "; late charge is being refunded"
		detail["refund_workflow_id"] = workflows.RefundWorkflowID(order.OrderID, cb.TransactionKey)
	}
	if err := h.store.RecordEvent(ctx, store.Event{OrderID: order.OrderID, Kind: store.KindCallback,
		Cause: "callback after the order settled: " + reason, Detail: detail}); err != nil {
		h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "database unavailable; retry later")
		return
	}
	h.log.Info("callback for a settled order", "order_id", order.OrderID, "status", cb.Status, "refund", refund)
	h.answer(w, http.StatusOK, CallbackAnswer{Accepted: false, Reason: reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
