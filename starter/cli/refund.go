package cli

import (
	"context"
	"fmt"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/orders"
)

// runRefund refunds a CONFIRMED order in full and returns its stock.
func runRefund(ctx context.Context, args []string, env Env) error {
	c := newCommand("refund", env)
	wait := c.fs.Bool("wait", true, "wait until the gateway has refunded and the stock is returned")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	orderID := c.args[0]
	if err := ids.CheckOrder(orderID); err != nil {
		return exitcode.UsageError(fmt.Errorf("refund: %w", err))
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := orders.Refund(ctx, cl, st, c.common.TaskQueue, orderID, *wait); err != nil {
		return err
	}
	v := orders.Read(ctx, cl, st, orderID)
	return c.print(v, v.Text())
}
