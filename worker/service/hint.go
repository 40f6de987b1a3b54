package service

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// The bound on lookup hints passed to one order's workflow, fleet-wide
// (store.PassHint).
const (
	HintEvery = time.Second
	MaxHints  = 100
)

// hint handles a callback whose signature does not verify, in lookup mode
// (--callback-auth lookup): gateways like the Loopers simulator, or Toss for
// payment events, sign nothing. Anyone can send such a body, so nothing in it
// is believed: it only asks the order's workflow to look the order up at the
// gateway now (workflows.LookupHintSignal), through the lookup breaker, and
// the gateway's answer decides. It never settles, refunds or records a status.
func (h *callbackHandler) hint(w http.ResponseWriter, r *http.Request, body []byte) {
	cb, order, ok := h.readOrder(w, r, body)
	if !ok {
		return
	}
	ctx := r.Context()
	if order.Status.Final() {
		// No workflow is left to look anything up, and an unverified SUCCESS
		// may not start a refund of whatever key it names: it is noted for
		// the operator and reconciliation, and the sender told to stop.
		reason := fmt.Sprintf("order already %s; unsigned callback not acted on", order.Status)
		if err := h.store.RecordEvent(ctx, store.Event{OrderID: order.OrderID, Kind: store.KindCallback,
			Cause:  "unsigned callback after the order settled: not verified, not acted on",
			Detail: map[string]any{"transaction_key": cb.TransactionKey, "claimed_status": cb.Status, "order_status": string(order.Status)}}); err != nil {
			h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "database unavailable; retry later")
			return
		}
		h.answer(w, http.StatusOK, CallbackAnswer{Accepted: false, Reason: reason})
		return
	}
	// A repeat, or one past the order's bound, is dropped here: the hint
	// passed before already brings a lookup forward, and the order's own
	// polls go on.
	pass, err := h.store.PassHint(ctx, cb.OrderID, HintEvery, MaxHints)
	if err != nil {
		h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "database unavailable; retry later")
		return
	}
	if !pass {
		h.metrics.HintDropped()
		h.answer(w, http.StatusOK, CallbackAnswer{Accepted: false,
			Reason: fmt.Sprintf("unsigned: a hint for this order was passed on within %s, or %d in all; dropped", HintEvery, MaxHints)})
		return
	}
	err = h.temporal.SignalWorkflow(ctx, workflows.PaymentWorkflowID(cb.OrderID), "", workflows.LookupHintSignal,
		workflows.LookupHint{TransactionKey: cb.TransactionKey, Status: cb.Status})
	var notFound *serviceerror.NotFound
	if err != nil {
		if errors.As(err, &notFound) {
			h.log.Error("unsigned callback for an order with no running workflow", "order_id", cb.OrderID)
		}
		h.refuse(w, http.StatusServiceUnavailable, "UNAVAILABLE", "cannot reach the order's workflow; retry later")
		return
	}
	h.log.Info("unsigned callback taken as a lookup hint", "order_id", cb.OrderID, "transaction_key", cb.TransactionKey, "claimed_status", cb.Status)
	h.answer(w, http.StatusOK, CallbackAnswer{Accepted: true, Reason: "unsigned: taken as a hint; the gateway will be asked"})
}
