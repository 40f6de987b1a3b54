// Package orders is what a client does with a placed order, whatever its
// door (the starter, the HTTP API): read its view, the workflow's and the
// database's together, and cancel it as an operator.
package orders

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// View is an order as `starter status` and GET /api/v1/orders/{id} show it.
type View struct {
	OrderID        string            `json:"orderId"`
	Status         status.Order      `json:"status"`
	PaymentStatus  status.Payment    `json:"paymentStatus"`
	TransactionKey string            `json:"transactionKey"`
	Attempts       int               `json:"attempts"`
	LastLookup     *workflows.Lookup `json:"lastLookup"`
	Deadline       *time.Time        `json:"deadline"`
	Reason         string            `json:"reason,omitempty"`
	// Sources says where each part came from and what could not be reached.
	Sources map[string]string `json:"sources"`
}

// Source values a View's Sources hold besides the reasons of a failure.
const (
	SourceOK          = "ok"
	SourceUnreachable = "unreachable"
)

// StateQueryTimeout bounds the workflow's state query in an order's view.
// The server answers a query between workflow tasks, so one asked while a
// task runs a local activity (the create, a database step) waits for that
// task — up to the create's timeout, or the task's heartbeat — and the
// database's view, which needs no workflow, is shown without it.
const StateQueryTimeout = 3 * time.Second

// queryState asks the order's workflow for its state, waiting at most
// StateQueryTimeout (busy then). The bound is this timer's, not a deadline
// on the call: the server may end a call at its deadline before the
// client's own timer says so, with an error that looks like any other.
func queryState(ctx context.Context, cl client.Client, orderID string) (st workflows.State, busy bool, err error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		st  workflows.State
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		resp, err := cl.QueryWorkflow(qctx, workflows.PaymentWorkflowID(orderID), "", workflows.StateQuery)
		if a.err = err; err == nil {
			a.err = resp.Get(&a.st)
		}
		answered <- a
	}()
	timer := time.NewTimer(StateQueryTimeout)
	defer timer.Stop()
	select {
	case a := <-answered:
		return a.st, false, a.err
	case <-timer.C:
		return workflows.State{}, true, nil
	}
}

// Read combines the workflow's state query with the database row. A nil
// client or store is a source that could not be reached.
func Read(ctx context.Context, cl client.Client, st *store.Store, orderID string) View {
	v := View{OrderID: orderID, Sources: map[string]string{}}
	if cl != nil {
		state, busy, err := queryState(ctx, cl, orderID)
		var notFound *serviceerror.NotFound
		switch {
		case busy:
			v.Sources["workflow"] = fmt.Sprintf("busy: no answer to the state query within %s (a workflow task is running)", StateQueryTimeout)
		case err == nil:
			v.Status, v.PaymentStatus, v.TransactionKey, v.Attempts = state.Status, state.PaymentStatus, state.TransactionKey, state.Attempts
			v.LastLookup, v.Reason = state.LastLookup, state.Reason
			deadline := state.Deadline
			v.Deadline = &deadline
			v.Sources["workflow"] = SourceOK
		case errors.As(err, &notFound):
			v.Sources["workflow"] = "no such workflow"
		default:
			v.Sources["workflow"] = SourceUnreachable + ": " + loadgen.RootCause(err).Error()
		}
	} else {
		v.Sources["workflow"] = SourceUnreachable
	}
	if st == nil {
		v.Sources["database"] = SourceUnreachable
		return v
	}
	o, err := st.GetOrder(ctx, orderID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		v.Sources["database"] = "no such order"
	case err != nil:
		v.Sources["database"] = SourceUnreachable + ": " + err.Error()
	default:
		v.Sources["database"] = SourceOK
		// The database is the record of what happened; the workflow adds
		// what only it knows (lookups, deadline).
		v.Status, v.PaymentStatus, v.Attempts = o.Status, o.PaymentStatus, max(v.Attempts, o.Attempts)
		if o.TransactionKey != "" {
			v.TransactionKey = o.TransactionKey
		}
		if v.Reason == "" {
			v.Reason = o.PaymentReason
		}
	}
	return v
}

// Found reports whether either source knows the order.
func (v View) Found() bool {
	return v.Sources["workflow"] == SourceOK || v.Sources["database"] == SourceOK
}

// Unreachable reports whether neither source could be asked.
func (v View) Unreachable() bool {
	return strings.HasPrefix(v.Sources["workflow"], SourceUnreachable) && strings.HasPrefix(v.Sources["database"], SourceUnreachable)
}

// Text is the view as `starter status` prints it.
func (v View) Text() string {
	var b strings.Builder
	payment := string(v.PaymentStatus)
	if payment == "" {
		payment = "-"
	}
	fmt.Fprintf(&b, "order %s: %s (payment %s)", v.OrderID, v.Status, payment)
	if v.TransactionKey != "" {
		fmt.Fprintf(&b, "\n  transaction: %s", v.TransactionKey)
	}
	fmt.Fprintf(&b, "\n  attempts:    %d", v.Attempts)
	if v.Reason != "" {
		fmt.Fprintf(&b, "\n  reason:      %s", v.Reason)
	}
	if v.LastLookup != nil {
		fmt.Fprintf(&b, "\n  last lookup: %s at %s", v.LastLookup.Result, v.LastLookup.At.Format(time.RFC3339))
	}
	if v.Deadline != nil {
		fmt.Fprintf(&b, "\n  deadline:    %s", v.Deadline.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\n  sources:     workflow %s; database %s", v.Sources["workflow"], v.Sources["database"])
	return b.String()
}
