package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/orders"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Started is what `order` prints.
type Started struct {
	OrderID    string `json:"orderId"`
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}

// OrderView is what `status` prints (and `order --wait` at the end).
type OrderView = orders.View

// OrderFlags are `order`'s own flags: an order as the load generator places
// it, and the order id (the load names its own).
type OrderFlags struct {
	loadgen.Order
	OrderID string
}

// registerOrder adds the flags of an order, shared by `order` and `load`.
func registerOrder(c *command, f *loadgen.Order) {
	c.fs.StringVar(&f.Product, "product", "", "product id (required)")
	c.fs.Int64Var(&f.Qty, "qty", 1, "quantity, at least 1")
	c.fs.Int64Var(&f.Amount, "amount", 0, "amount in minor units, positive (required)")
	c.fs.StringVar(&f.User, "user", "user-1", "the customer's id, sent as X-USER-ID")
	c.fs.StringVar(&f.CardType, "card-type", "SAMSUNG", "SAMSUNG, KB or HYUNDAI")
	c.fs.StringVar(&f.CardNo, "card-no", "1234-5678-9814-1451", "card number dddd-dddd-dddd-dddd")
	c.fs.DurationVar(&f.Deadline, "deadline", workflows.DefaultDeadline, "give up (cancel and release) after this long")
}

func (f *OrderFlags) validate() error {
	if f.OrderID != "" { // "" is a fresh one
		if err := ids.CheckNewOrder(f.OrderID); err != nil {
			return fmt.Errorf("--order-id: %w", err)
		}
	}
	return f.Order.Validate()
}

func runOrder(ctx context.Context, args []string, env Env) error {
	c := newCommand("order", env)
	var f OrderFlags
	registerOrder(c, &f.Order)
	c.fs.StringVar(&f.OrderID, "order-id", "", "order id (default: a fresh one)")
	wait := c.fs.Bool("wait", false, "wait for the final status and print the order")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return exitcode.UsageError(fmt.Errorf("order: %w", err))
	}
	if f.OrderID == "" {
		f.OrderID = loadgen.NewOrderID()
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	run, err := loadgen.StartOrder(ctx, cl, c.common.TaskQueue, f.Input(f.OrderID))
	if err != nil {
		return err
	}
	started := Started{OrderID: f.OrderID, WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if !*wait {
		return c.print(started, fmt.Sprintf("order %s started: workflow %s run %s", started.OrderID, started.WorkflowID, started.RunID))
	}
	if !*c.json {
		fmt.Fprintf(env.Stdout, "order %s started (workflow %s); waiting for the final status...\n", started.OrderID, started.WorkflowID)
	}
	var final workflows.State
	err = run.Get(ctx, &final)
	var canceled *temporal.CanceledError
	if err != nil && !errors.As(err, &canceled) {
		return fmt.Errorf("order %s: workflow ended with an error: %v", f.OrderID, loadgen.RootCause(err))
	}
	view := c.orderView(ctx, cl, f.OrderID)
	if err := c.print(view, view.Text()); err != nil {
		return err
	}
	// The order's final status is the exit code: a script can tell a
	// FAILED order from a CONFIRMED one (exitcode.OfOrder).
	return exitcode.Final(f.OrderID, view.Status, view.Reason)
}

// orderView reads the order from both sources, the database's failure to
// open named in its view.
func (c *command) orderView(ctx context.Context, cl client.Client, orderID string) OrderView {
	st, err := c.openStore(ctx)
	if err != nil {
		v := orders.Read(ctx, cl, nil, orderID)
		v.Sources["database"] = orders.SourceUnreachable + ": " + err.Error()
		return v
	}
	defer st.Close()
	return orders.Read(ctx, cl, st, orderID)
}

func runStatus(ctx context.Context, args []string, env Env) error {
	c := newCommand("status", env)
	if err := c.parse(args, 1); err != nil {
		return err
	}
	orderID := c.args[0]
	if err := ids.CheckOrder(orderID); err != nil {
		return exitcode.UsageError(fmt.Errorf("status: %w", err))
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		cl = nil
	} else {
		defer cl.Close()
	}
	v := c.orderView(ctx, cl, orderID)
	if err != nil {
		v.Sources["workflow"] = "unreachable: " + err.Error()
	}
	if !v.Found() {
		if v.Unreachable() {
			return exitcode.UnavailableError(fmt.Errorf("status %s: neither Temporal nor PostgreSQL is reachable (%s; %s)", orderID, v.Sources["workflow"], v.Sources["database"]))
		}
		err := fmt.Errorf("unknown order %q (workflow: %s; database: %s)", orderID, v.Sources["workflow"], v.Sources["database"])
		if strings.HasPrefix(v.Sources["workflow"], orders.SourceUnreachable) || strings.HasPrefix(v.Sources["database"], orders.SourceUnreachable) {
			return exitcode.UnavailableError(err) // the source out of reach may know it
		}
		return err
	}
	return c.print(v, v.Text())
}

func runCancel(ctx context.Context, args []string, env Env) error {
	c := newCommand("cancel", env)
	wait := c.fs.Bool("wait", true, "wait until the compensation is done")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	orderID := c.args[0]
	if err := ids.CheckOrder(orderID); err != nil {
		return exitcode.UsageError(fmt.Errorf("cancel: %w", err))
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	err = orders.Cancel(ctx, cl, orderID, *wait, func(ctx context.Context) OrderView { return c.orderView(ctx, cl, orderID) })
	if err != nil {
		return err
	}
	v := c.orderView(ctx, cl, orderID)
	return c.print(v, v.Text())
}

func runStock(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return exitcode.UsageError(errors.New("stock: want `stock set PRODUCT QTY` or `stock show PRODUCT`"))
	}
	sub := args[0]
	c := newCommand("stock "+sub, env)
	var want int
	switch sub {
	case "set":
		want = 2
	case "show":
		want = 1
	default:
		return exitcode.UsageError(fmt.Errorf("stock: unknown subcommand %q (set, show)", sub))
	}
	if err := c.parse(args[1:], want); err != nil {
		return err
	}
	if err := ids.CheckProduct(c.args[0]); err != nil {
		return exitcode.UsageError(fmt.Errorf("stock %s: %w", sub, err))
	}
	var qty int64
	if sub == "set" {
		var err error
		qty, err = strconv.ParseInt(c.args[1], 10, 64)
		if err != nil || qty < 0 {
			return exitcode.UsageError(fmt.Errorf("stock set: QTY must be a whole number ≥ 0, got %q", c.args[1]))
		}
	}
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("stock: %v", err)
	}
	var stock store.Stock
	if sub == "set" {
		stock, err = st.SetStock(ctx, c.args[0], qty)
	} else {
		stock, err = st.GetStock(ctx, c.args[0])
	}
	if err != nil {
		return fmt.Errorf("stock %s: %v", sub, err)
	}
	return c.print(stock, fmt.Sprintf("%s: total %d, available %d, reserved %d, sold %d",
		stock.ProductID, stock.Total, stock.Available, stock.Reserved, stock.Sold))
}

func runCallback(ctx context.Context, args []string, env Env) error {
	c := newCommand("callback", env)
	st := c.fs.String("status", "", "SUCCESS or FAILED (required)")
	reason := c.fs.String("reason", "", "failure reason, e.g. LIMIT_EXCEEDED")
	key := c.fs.String("transaction-key", "", "transaction key (default: the order's)")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	orderID := c.args[0]
	if err := ids.CheckOrder(orderID); err != nil {
		return exitcode.UsageError(fmt.Errorf("callback: %w", err))
	}
	if *st != gateway.StatusSuccess && *st != gateway.StatusFailed {
		return exitcode.UsageError(fmt.Errorf("callback: --status must be SUCCESS or FAILED, got %q", *st))
	}
	if *st == gateway.StatusFailed && *reason == "" {
		*reason = "LIMIT_EXCEEDED"
	}
	db, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	o, err := db.GetOrder(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("unknown order %q", orderID)
	}
	if err != nil {
		return fmt.Errorf("callback: %v", err)
	}
	if *key == "" {
		*key = o.TransactionKey
	}
	if *key == "" {
		return fmt.Errorf("callback: order %s has no transaction key yet; pass --transaction-key", orderID)
	}
	body, _ := json.Marshal(gateway.TransactionInfo{TransactionKey: *key, OrderID: orderID, Amount: o.Amount, Status: *st,
		Reason: gateway.Nullable(*reason)})
	code, answer, err := PostCallback(ctx, c.common.CallbackURL, []byte(c.common.GatewaySecret), body, time.Now())
	if err != nil {
		return fmt.Errorf("callback: worker unreachable at %s: %v", c.common.CallbackURL, loadgen.RootCause(err))
	}
	out := map[string]any{"httpStatus": code, "answer": answer}
	if code != http.StatusOK {
		return fmt.Errorf("callback refused: HTTP %d %v", code, answer)
	}
	return c.print(out, fmt.Sprintf("callback %s for order %s: HTTP %d, accepted %v", *st, orderID, code, answer["accepted"]))
}

// PostCallback signs body as the gateway does and POSTs it to url.
func PostCallback(ctx context.Context, url string, secret, body []byte, now time.Time) (int, map[string]any, error) {
	req, err := gateway.NewCallback(ctx, url, body)
	if err != nil {
		return 0, nil, err
	}
	gateway.SignCallback(req, secret, body, now)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	answer := map[string]any{}
	_ = json.Unmarshal(raw, &answer)
	return resp.StatusCode, answer, nil
}
