package service

import (
	"flag"
	"net/url"
	"strconv"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The worker's capacity knobs, measured by `make bench` (docs/design.md
// §11): each left at 0 keeps the library's default.

func registerTuning(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.DBMaxConns, "db-max-conns", 0, "PostgreSQL pool size (0: pgx's default, max(4, CPUs))")
	fs.IntVar(&c.StickyCacheSize, "sticky-cache-size", 0, "workflows kept in memory between tasks (0: the SDK's 10000); an evicted one replays its history on its next task")
	fs.IntVar(&c.TaskPollers, "task-pollers", 0, "concurrent workflow and activity task pollers, each (0: the SDK's 2)")
}

// databaseURL is DatabaseURL with the pool size, when one is set, in pgx's
// pool_max_conns parameter.
func (c Config) databaseURL() string {
	if c.DBMaxConns == 0 {
		return c.DatabaseURL
	}
	u, err := url.Parse(c.DatabaseURL)
	if err != nil {
		return c.DatabaseURL // Validate has refused it already
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(c.DBMaxConns))
	u.RawQuery = q.Encode()
	return u.String()
}

// newWorker builds the SDK worker. The sticky cache is the SDK's
// process-wide setting, so it is set here, before the worker exists.
func (c Config) newWorker(cl client.Client) worker.Worker {
	if c.StickyCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(c.StickyCacheSize)
	}
	return worker.New(cl, c.TaskQueue, c.workerOptions())
}

// workerOptions are the SDK worker's options.
func (c Config) workerOptions() worker.Options {
	return worker.Options{WorkerStopTimeout: c.ShutdownTimeout,
		MaxConcurrentWorkflowTaskPollers: c.TaskPollers, MaxConcurrentActivityTaskPollers: c.TaskPollers}
}
