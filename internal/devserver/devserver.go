// Package devserver holds what the local development stack is made of, for
// the demo, chaos and the tests alike: the one definition of the flags
// payguard runs the Temporal dev server with, and where the temporal CLI
// and the PostgreSQL server for fresh databases are found (local.go).
//
// The demo and chaos start the dev server from Args, the tests start theirs
// with TuningArgs, and the copies that must live outside Go
// (scripts/dev-server.sh, docker-compose.yml) are checked against these by a
// test at the module root.
package devserver

import (
	"github.com/payguard/payguard/workflows"
)

// TuningArgs remove the dev server's transfer poll limit and task-queue
// partitions: with its defaults every task hop costs ~50 ms, which the
// demo's and tests' timings cannot afford. They also turn the search
// attribute cache back on, as a production server has it: the dev server
// turns it off so that attributes added at run time are seen at once, and
// then reads the namespace from its database, under one lock, on every use
// of a search attribute — each start, upsert, close and describe of an
// order; `perf` put that at a sixth of its CPU under load. payguard's
// attributes are registered at start (SearchAttributeArgs), before the
// cache is first filled. (The cache was off for a while after make chaos
// seemed to blame it for orders without OrderStatus; the cause was the
// sweep recovering orders that had just ended, since fixed.) The real
// server's ops/temporal/dynamicconfig.yaml holds the same values
// (temporalserver's test checks it).
var TuningArgs = []string{
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=200",
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	"--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false",
}

// EagerArgs let the server hand a worker the activity its workflow task
// just scheduled in the task's own answer (eager activity execution, which
// the SDK asks for by default), and a starter with a worker in its own
// process the first workflow task (eager workflow start): each skips a
// round trip through matching. `make bench --eager` measures them.
var EagerArgs = []string{
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	"--dynamic-config-value", "system.enableEagerWorkflowStart=true",
}

// SQLiteArgs make a file-backed server's writes cheap enough for the demo's
// load (WAL, no fsync per commit); a crash may lose the last writes, which a
// development server can afford.
var SQLiteArgs = []string{"--sqlite-pragma", "journal_mode=WAL", "--sqlite-pragma", "synchronous=NORMAL"}

// SearchAttributeArgs register the search attributes the workflow keeps
// current (workflows.OrderStatusKey, PaymentStatusKey).
func SearchAttributeArgs() []string {
	return []string{
		"--search-attribute", workflows.OrderStatusKey.GetName() + "=Keyword",
		"--search-attribute", workflows.PaymentStatusKey.GetName() + "=Keyword",
	}
}

// Args is the whole command line of a dev server that keeps its history in
// dbFile and listens on ip:port, with its UI on uiPort ("" for none). The
// UI decodes payloads through codecEndpoint (the worker's codec server,
// config.DefaultCodecEndpoint locally; "" for none): without it the UI
// shows only ciphertext.
func Args(ip, port, uiPort, codecEndpoint, dbFile string) []string {
	args := []string{"server", "start-dev", "--ip", ip, "--port", port}
	if uiPort == "" {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", uiPort)
		if codecEndpoint != "" {
			args = append(args, "--ui-codec-endpoint", codecEndpoint)
		}
	}
	args = append(args, "--db-filename", dbFile, "--log-level", "warn")
	args = append(args, SearchAttributeArgs()...)
	args = append(args, TuningArgs...)
	return append(args, SQLiteArgs...)
}
