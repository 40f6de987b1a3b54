package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/loadgen"
)

// The no-op baseline: a workflow of the same shape as a happy-path order
// (Reserve, RequestPayment, Settle — the callback is a signal, not an
// activity) whose activities do nothing, so what it costs is Temporal's
// share alone. It runs on its own task queue, on a worker inside the bench
// process with the SDK's default options.
const (
	noopTaskQueue    = "payguard-bench-noop"
	noopWorkflowName = "BenchNoopOrder"
	noopActivityName = "BenchNoop"
	// happyPathActivities is how many activities a happy-path order runs.
	happyPathActivities = 3
)

// noopInput is the baseline workflow's one argument.
type noopInput struct {
	Activities int `json:"activities"`
}

func noopWorkflow(ctx workflow.Context, in noopInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for range in.Activities {
		if err := workflow.ExecuteActivity(ctx, noopActivityName).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func noopActivity(context.Context) error { return nil }

// startNoopWorker serves the baseline workflow until stopped.
func startNoopWorker(cl client.Client) (worker.Worker, error) {
	w := worker.New(cl, noopTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(noopWorkflow, workflow.RegisterOptions{Name: noopWorkflowName})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: noopActivityName})
	return w, w.Start()
}

// Baseline is the no-op workflow's closed-loop result.
type Baseline struct {
	InFlight    int                 `json:"inFlight"`
	Activities  int                 `json:"activities"`
	DurationSec float64             `json:"durationSeconds"`
	Completed   int                 `json:"completed"`
	Errors      int                 `json:"errors"`
	PerSecond   float64             `json:"workflowsPerSecond"`
	Latency     loadgen.Percentiles `json:"latency"`
	FirstError  string              `json:"firstError,omitempty"`
	CPU         CPUCost             `json:"cpuPerWorkflow"`
}

// runBaseline keeps inFlight no-op workflows running for d: each of
// inFlight loops starts one, waits for its result, and starts the next.
func runBaseline(ctx context.Context, cl client.Client, inFlight int, d time.Duration, prefix string) Baseline {
	b := Baseline{InFlight: inFlight, Activities: happyPathActivities}
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	began := time.Now()
	stop := began.Add(d)
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop) && ctx.Err() == nil; n++ {
				start := time.Now()
				run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: fmt.Sprintf("%s-%d-%d", prefix, g, n), TaskQueue: noopTaskQueue,
				}, noopWorkflowName, noopInput{Activities: happyPathActivities})
				if err == nil {
					err = run.Get(ctx, nil)
				}
				mu.Lock()
				if err != nil {
					b.Errors++
					if b.FirstError == "" {
						b.FirstError = err.Error()
					}
				} else {
					b.Completed++
					lat = append(lat, float64(time.Since(start).Microseconds())/1000)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began).Seconds()
	b.DurationSec = round2(elapsed)
	b.PerSecond = round2(float64(b.Completed) / elapsed)
	b.Latency = loadgen.Latencies(lat)
	return b
}
