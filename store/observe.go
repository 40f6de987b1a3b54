package store

import (
	"context"

	"github.com/payguard/payguard/status"
)

// Observer hears of orders ending, once per order, after the transaction
// that recorded the end has committed: only the store sees every end
// exactly once (a workflow replays, an activity is retried, a repeated
// move is a no-op here and is not heard of again). The worker counts
// payguard_orders_total and payguard_lost_orders_total with it.
type Observer interface {
	// OrderFinal: the order reached its final status st.
	OrderFinal(orderID string, st status.Order)
	// OrderLost: the order became lost, kind one of LostKinds as Outcomes
	// tells it at that moment. It happens once per order: when it reaches
	// CANCELLED without an operator's cancel, or when a CONFIRMED or FAILED
	// order's charge is refunded neither by an operator's cancel nor at the
	// customer's request. A lost CANCELLED order whose late charge is
	// refunded afterwards (Outcomes then says "refunded") is not heard of
	// again.
	OrderLost(orderID, kind string)
}

// Observe sets the observer of order ends; nil (the default) reads
// nothing more. Call it before the store is used.
func (s *Store) Observe(o Observer) { s.observer = o }

// ending is what one transaction did to an order that an Observer hears of.
type ending struct {
	final    status.Order // the final status it moved to, or ""
	refunded bool         // its payment moved to REFUNDED
}

// endings reads tx's event lines (before flush empties them) for orders
// that reached a final status or whose payment was refunded.
func (tx *tx) endings() map[string]ending {
	var out map[string]ending
	for _, l := range tx.events {
		to := l.to
		switch {
		case l.kind == KindOrder && status.Order(to).Final():
		case l.kind == KindPayment && to == string(status.PaymentRefunded):
		default:
			continue
		}
		if out == nil {
			out = map[string]ending{}
		}
		e := out[l.orderID]
		if l.kind == KindOrder {
			e.final = status.Order(to)
		} else {
			e.refunded = true
		}
		out[l.orderID] = e
	}
	return out
}

// heard is one call an Observer is due once the transaction commits.
type heard struct {
	orderID string
	final   status.Order // "" for none
	lost    string       // "" for none
}

// classify reads, inside tx after its event lines are written, which of
// the ended orders are lost, by Outcomes' definition.
func classify(ctx context.Context, tx *tx, ended map[string]ending) ([]heard, error) {
	ids := make([]string, 0, len(ended))
	for id := range ended {
		ids = append(ids, id)
	}
	outs, err := outcomes(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]heard, 0, len(outs))
	for _, o := range outs {
		e := ended[o.OrderID]
		h := heard{orderID: o.OrderID, final: e.final}
		switch {
		case e.final != "":
			h.lost = o.Lost
		case e.refunded && (o.Status == status.OrderConfirmed || o.Status == status.OrderFailed):
			// A CANCELLED order was lost, or not, when it was cancelled.
			h.lost = o.Lost
		}
		if h.final != "" || h.lost != "" {
			out = append(out, h)
		}
	}
	return out, nil
}

// tell passes the calls on, after the commit.
func (s *Store) tell(hs []heard) {
	for _, h := range hs {
		if h.final != "" {
			s.observer.OrderFinal(h.orderID, h.final)
		}
		if h.lost != "" {
			s.observer.OrderLost(h.orderID, h.lost)
		}
	}
}
