package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
)

// payment is the state of one PaymentWorkflow (or RecoverWorkflow) run.
type payment struct {
	in        PaymentInput
	tuning    Tuning
	state     State
	log       log.Logger
	callbacks workflow.ReceiveChannel
	hints     workflow.ReceiveChannel // LookupHintSignal

	keys           []string             // every gateway transaction of this order we know of
	closed         map[string]bool      // those known FAILED or CANCELLED: nothing left to cancel
	maybeAtGateway bool                 // a create was accepted or may have been
	proofDue       time.Time            // from when a lookup that finds nothing justifies a re-send
	listedBy       time.Time            // when the gateway lists what the latest create that may have reached it made
	outcome        *gateway.Transaction // the first definitive answer
	compensated    []string             // transactions cancelled by compensation
	recalled       *gateway.Transaction // the answer an earlier run of the first task settled (recall)
	resends        int                  // re-sends authorised so far
	hintLooked     bool                 // a lookup hint was looked up since the last regular poll (hints.go)
	retryAfter     time.Duration        // the latest poll's breaker was open: when it may let one through
	searching      bool                 // the answers being read come from a lookup by order id
	heldFailed     *gateway.Transaction // a FAILED answer waiting for a search by order id (decide)
}

// track adds a transaction of the order to those it knows of.
func (p *payment) track(key string) {
	if key != "" && !slices.Contains(p.keys, key) {
		p.keys = append(p.keys, key)
	}
}

// setStatus updates the query state and the search attributes together.
// A final order status never moves.
func (p *payment) setStatus(ctx workflow.Context, order status.Order, pay status.Payment) {
	p.setState(order, pay)
	p.publish(ctx)
}

// setState updates the query state only; publish brings the search
// attributes up to it.
func (p *payment) setState(order status.Order, pay status.Payment) {
	if p.state.Status.Final() && order != "" && order != p.state.Status {
		p.log.Warn("order already final; status kept", "status", p.state.Status, "refused", order)
		order = ""
	}
	if order != "" {
		p.state.Status = order
	}
	if pay != "" {
		p.state.PaymentStatus = pay
	}
}

// publish upserts the statuses the search attributes do not show yet.
func (p *payment) publish(ctx workflow.Context) {
	var updates []temporal.SearchAttributeUpdate
	current := workflow.GetTypedSearchAttributes(ctx)
	for _, kv := range []struct {
		key   temporal.SearchAttributeKeyKeyword
		value string
	}{{OrderStatusKey, string(p.state.Status)}, {PaymentStatusKey, string(p.state.PaymentStatus)}} {
		if kv.value == "" {
			continue
		}
		// Each upsert is a write to the server's visibility store; one that
		// changes nothing (the starter sets RESERVING at start) is skipped.
		if was, ok := current.GetKeyword(kv.key); ok && was == kv.value {
			continue
		}
		updates = append(updates, kv.key.ValueSet(kv.value))
	}
	if len(updates) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		p.log.Warn("upsert search attributes", "error", err)
	}
}

// dbStep runs one of the order's database activities (Reserve, Settle,
// CancelOrder, RecordEvent) as a local activity, run by the worker inside the workflow task that asks for it: a regular one
// costs two more task hops through the server and a workflow task of its
// own (docs/design.md §2). Each is one short transaction, idempotent, so a
// retry repeats it harmlessly, and a worker lost mid-task runs it again on
// replay. After localTries it goes on as a regular activity (options.go).
func (p *payment) dbStep(ctx workflow.Context, summary string, activity, in any) workflow.Future {
	regular := func() workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, databaseOptions(summary)), activity, in)
	}
	local := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions(summary)), activity, in)
	done, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if err := local.Get(gctx, nil); outOfLocalTries(err) {
			p.log.Warn("database step still failing after its local tries; going on as a regular activity", "step", summary, "error", err)
			settable.Chain(regular())
			return
		}
		settable.Chain(local)
	})
	return done
}

func (p *payment) settleStep(ctx workflow.Context, in activities.SettleInput) error {
	summary := fmt.Sprintf("Record order %s (amount %d): %s", p.in.OrderID, p.in.Amount, in.Cause)
	err := p.dbStep(ctx, summary, a.Settle, in).Get(ctx, nil)
	if err != nil {
		p.log.Error("settle step failed", "cause", in.Cause, "error", err)
	}
	return err
}

// record appends to the order's event log; losing a note is not worth
// failing the payment over, so errors are logged only.
func (p *payment) record(ctx workflow.Context, kind, cause string, detail map[string]any) {
	if kind == activities.KindAnomaly {
		p.state.Anomalies++
	}
	err := p.dbStep(ctx, fmt.Sprintf("Note on order %s (amount %d): %s", p.in.OrderID, p.in.Amount, cause),
		a.RecordEvent, activities.EventInput{OrderID: p.in.OrderID, Kind: kind, Cause: cause, Detail: detail}).Get(ctx, nil)
	if err != nil {
		p.log.Warn("record event", "cause", cause, "error", err)
	}
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func isType(err error, types ...string) bool {
	t := errorType(err)
	return t != "" && slices.Contains(types, t)
}
