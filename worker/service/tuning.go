package service

import (
	"flag"
	"fmt"
	"net/url"
	"strconv"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The worker's capacity knobs, measured by `make bench` (docs/design.md
// §11): each set to 0 keeps the library's default.

// DefaultStickyCacheSize is how many workflows the worker keeps in memory
// between their tasks. The SDK's 10 000 holds every waiting order, some
// 75 KB each (its coroutines' stacks and state): 10 000 orders waiting on
// their callbacks took 750 MB. An order being worked on is in the cache
// for well under a second, so 1000 holds every busy one at hundreds of
// orders a second; a waiting order that was evicted replays its short
// history at its next poll or callback. Measured: with 1000, the worker
// stayed at ~121 MB from 2500 to 4000 waiting orders.
const DefaultStickyCacheSize = 1000

// DefaultWorkflowPollsPerQueue is how many workflow task polls the worker
// keeps open on each of its two queues (workerOptions). One a queue fell
// behind at 30 orders/s on a 2-core machine (a single poll at a time must
// fetch every order's first task, one server round trip each, the
// slowest step under load). More is worse when a worker freezes (SIGSTOP,
// a paused VM): its open polls stay at the server and each takes a task
// that then waits out its 10 s timeout; the SDK's own cap of 100 polls a
// queue let one frozen worker hold an order back for over a minute.
const DefaultWorkflowPollsPerQueue = 2

func registerTuning(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.DBMaxConns, "db-max-conns", 0, "PostgreSQL pool size (0: pgx's default, max(4, CPUs))")
	fs.IntVar(&c.StickyCacheSize, "sticky-cache-size", DefaultStickyCacheSize, "workflows kept in memory between tasks (0: the SDK's 10000); an evicted one replays its history on its next poll or callback")
	fs.IntVar(&c.TaskPollers, "task-pollers", 0, fmt.Sprintf("workflow task polls at most on each of the order queue and the worker's sticky queue, scaled between 1 and N by the server's hints, and N activity task pollers (0: %d on each queue; the SDK's 2 activity pollers)", DefaultWorkflowPollsPerQueue))
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
//
// The workflow task pollers are the SDK's autoscaling ones: a pool on the
// order queue and one on the worker's sticky queue, each of 1 to
// --task-pollers polls (DefaultWorkflowPollsPerQueue, which says why so
// few). The SDK's fixed pollers share one pool between the two queues and
// send every poll to the sticky queue while its last answer there said
// tasks were waiting; a stale hint keeps them there until a sticky answer
// says otherwise or a poll comes back empty, the server's minute-long
// poll when no task comes, with no poll on the order queue, where every
// new order's first task waits. `make bench` saw a minute in which no
// order started (design §11).
func (c Config) workerOptions() worker.Options {
	perQueue := c.TaskPollers
	if perQueue == 0 {
		perQueue = DefaultWorkflowPollsPerQueue
	}
	return worker.Options{WorkerStopTimeout: c.ShutdownTimeout,
		DeploymentOptions: worker.DeploymentOptions{UseVersioning: true, Version: c.version()},
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: perQueue, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: perQueue}),
		MaxConcurrentActivityTaskPollers: c.TaskPollers}
}
