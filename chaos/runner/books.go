package runner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// readDatabase is PostgreSQL's book: every order and product.
func readDatabase(ctx context.Context, st *store.Store) (map[string]store.Order, map[string]store.Stock, error) {
	ids, err := column(ctx, st, "SELECT order_id FROM orders")
	if err != nil {
		return nil, nil, err
	}
	orders := map[string]store.Order{}
	for _, id := range ids {
		if orders[id], err = st.GetOrder(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	pids, err := column(ctx, st, "SELECT product_id FROM products")
	if err != nil {
		return nil, nil, err
	}
	products := map[string]store.Stock{}
	for _, id := range pids {
		if products[id], err = st.GetStock(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	return orders, products, nil
}

// readOutcomes is how the database's orders ended (store.Outcomes).
func readOutcomes(ctx context.Context, st *store.Store, orders map[string]store.Order) (map[string]store.Outcome, error) {
	outs, err := st.Outcomes(ctx, slices.Collect(maps.Keys(orders)))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.Outcome, len(outs))
	for _, o := range outs {
		byID[o.OrderID] = o
	}
	return byID, nil
}

func column(ctx context.Context, st *store.Store, query string) ([]string, error) {
	rows, err := st.Pool().Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// readGateway is pgsim's book: the create counts of /admin/stats and each
// order's transactions as its lookup by order id shows them.
func readGateway(ctx context.Context, p *stack.Pgsim) (map[string]check.GatewayOrder, error) {
	var stats simulator.Stats
	if err := simulator.AdminCall(ctx, http.MethodGet, p.AdminURL, "/admin/stats", nil, &stats); err != nil {
		return nil, err
	}
	// The transactions are read with payguard's own gateway client, which
	// speaks the wire format; the checker compares statuses, never amounts
	// (a lookup by order lists none).
	gw, err := gateway.New(gateway.Config{BaseURL: p.GatewayURL, ReadTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer gw.Close()
	out := map[string]check.GatewayOrder{}
	for id, s := range stats.Orders {
		txs, err := gw.PaymentsByOrder(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("transactions of %s: %w", id, err)
		}
		out[id] = check.GatewayOrder{CreateRequests: s.CreateRequests, CreatedThen500: s.CreatedThen500, Transactions: txs.Transactions}
	}
	return out, nil
}

// readTemporal is Temporal's book for the given orders, and the ids of the
// workflows still running (payments and refunds alike).
func readTemporal(ctx context.Context, cl client.Client, orderIDs []string) (map[string]check.Workflow, []string, error) {
	out := map[string]check.Workflow{}
	for _, id := range orderIDs {
		desc, err := cl.DescribeWorkflow(ctx, workflows.PaymentWorkflowID(id), "")
		if err != nil {
			continue // no workflow: the checker reports the order
		}
		w := check.Workflow{Status: desc.Status.String()}
		if v, ok := desc.TypedSearchAttributes.GetKeyword(workflows.OrderStatusKey); ok {
			w.SearchStatus = v
		}
		if desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			var st workflows.State
			if err := cl.GetWorkflow(ctx, workflows.PaymentWorkflowID(id), "").Get(ctx, &st); err != nil {
				return nil, nil, fmt.Errorf("result of %s: %w", id, err)
			}
			w.Result = st.Status
		}
		out[id] = w
	}
	// Payments and refunds: a scheduled reconcile sweep may have just begun.
	running, err := listWorkflows(ctx, cl, fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowType IN ('%s', '%s')",
		workflows.PaymentWorkflowName, workflows.RefundWorkflowName))
	return out, running, err
}

func listWorkflows(ctx context.Context, cl client.Client, query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			ids = append(ids, e.Execution.WorkflowId)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return ids, nil
		}
	}
}

// replayAll replays every closed workflow's history against today's code.
// The histories hold encrypted payloads: the replayer decodes them with the
// run's key ring, as the workers did.
func replayAll(ctx context.Context, cl client.Client, codecKeys string) (map[string]string, error) {
	ids, err := listWorkflows(ctx, cl, "ExecutionStatus != 'Running'")
	if err != nil {
		return nil, err
	}
	cd, err := (&config.Common{CodecKeys: codecKeys}).Codec()
	if err != nil {
		return nil, err
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: cd.DataConverter(), FailureConverter: cd.FailureConverter()})
	if err != nil {
		return nil, err
	}
	workflows.New(workflows.DefaultTuning()).Register(r)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	out := map[string]string{}
	for _, id := range ids {
		var h historypb.History
		it := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", id, err)
			}
			h.Events = append(h.Events, e)
		}
		out[id] = ""
		if err := r.ReplayWorkflowHistory(logger, &h); err != nil {
			out[id] = err.Error()
		}
	}
	return out, nil
}

// settled reports whether the run is over: every order final in the
// database, no workflow running, nothing PENDING at the gateway.
func settled(ctx context.Context, st *store.Store, cl client.Client, p *stack.Pgsim) (bool, string) {
	orders, _, err := readDatabase(ctx, st)
	if err != nil {
		return false, "database: " + err.Error()
	}
	open := 0
	for _, o := range orders {
		if !o.Status.Final() {
			open++
		}
	}
	if open > 0 {
		return false, fmt.Sprintf("%d orders not final", open)
	}
	n, err := cl.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		return false, "temporal: " + err.Error()
	}
	if n.Count > 0 {
		return false, fmt.Sprintf("%d workflows running", n.Count)
	}
	g, err := readGateway(ctx, p)
	if err != nil {
		return false, "gateway: " + err.Error()
	}
	for id, o := range g {
		for _, tx := range o.Transactions {
			if tx.Status == gateway.StatusPending {
				return false, "transaction " + tx.TransactionKey + " of " + id + " PENDING"
			}
		}
	}
	return true, ""
}

// waitSettled polls settled until it holds or within passes.
func waitSettled(ctx context.Context, st *store.Store, cl client.Client, p *stack.Pgsim, within time.Duration, say func(string, ...any)) bool {
	deadline := time.Now().Add(within)
	last := time.Time{}
	for {
		ok, why := settled(ctx, st, cl, p)
		if ok {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			say("not settled after %s: %s", within, why)
			return false
		}
		if time.Since(last) > 10*time.Second {
			say("waiting for the run to settle: %s", why)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
