package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/loadgen"
)

// runLoad is the `load` command: the load generator's run, from flags.
func runLoad(ctx context.Context, args []string, env Env) error {
	c := newCommand("load", env)
	var cfg loadgen.Config
	registerOrder(c, &cfg.Order)
	c.fs.Float64Var(&cfg.Rate, "rate", 0, "orders per second (required)")
	c.fs.DurationVar(&cfg.Duration, "duration", 0, "how long to launch orders (required)")
	products := c.fs.String("products", "P1", "comma-separated product ids, used in turn")
	stock := c.fs.Int64("stock", -1, "set each product's total stock to this first (default: leave it)")
	c.fs.DurationVar(&cfg.WaitTimeout, "wait-timeout", 0, "how long to wait for final statuses after the last launch (default: deadline + 1m)")
	c.fs.StringVar(&cfg.MetricsURL, "metrics-url", config.DefaultMetricsURL, "the worker's metrics, watched for breaker changes (\"\" to skip)")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	// The load has a default amount where a single order demands one; an
	// amount given explicitly is validated like any order's.
	amountSet := false
	c.fs.Visit(func(f *flag.Flag) { amountSet = amountSet || f.Name == "amount" })
	if !amountSet {
		cfg.Order.Amount = 5000
	}
	cfg.Products = splitList(*products)
	cfg.TaskQueue = c.common.TaskQueue
	if err := cfg.Validate(); err != nil {
		return exitcode.UsageError(fmt.Errorf("load: %w", err))
	}
	if *stock >= 0 {
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		err = st.SetStocks(ctx, cfg.Products, *stock)
		st.Close()
		if err != nil {
			return fmt.Errorf("load: %v", err)
		}
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	summary := loadgen.Run(ctx, cl, cfg, env.Stderr)
	if *c.json {
		return c.print(summary, "")
	}
	summary.Orders = nil
	return c.print(nil, summary.Table())
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
