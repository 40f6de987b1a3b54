package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
)

// The bench's quick mode, every phase, against the real stack (dev server,
// PostgreSQL, pgsim and worker processes), so the harness cannot rot. It
// checks what the run counted and wrote, never how fast anything was.
func TestQuickBenchRunsEveryPhaseOnTheRealStack(t *testing.T) {
	r, out, stdout := runOnTheRealStack(t, "--quick", "--label", "test")
	// The baselines climb the same rates by the same rule, their
	// workflows followed to the end as payguard's orders are.
	for name, steps := range map[string][]Step{"minimal": r.MinimalSteps, "no-op": r.NoopSteps} {
		require.Len(t, steps, 2, "%s: rates 2 and 4", name)
		for _, s := range steps {
			assert.Equal(t, int(s.Offered*s.DurationSec), s.Launched, "%s: every workflow of a step is launched", name)
			assert.Zero(t, s.Final["ERROR"]+s.Final["NOT_STARTED"], "%s: %v", name, s.Final)
			assert.Positive(t, s.Final["CONFIRMED"], "%s: workflows complete: %v", name, s.Final)
			assert.Positive(t, s.CPU.Server, "%s: the dev server's CPU per workflow is measured", name)
			assert.Zero(t, s.CPU.Worker, "%s: the payguard worker is not part of a baseline", name)
			assert.Zero(t, s.CPU.OrdersDatabase, "%s: nor is payguard's database", name)
			assert.Zero(t, s.Outcomes.Orders, "%s: no order rows", name)
		}
	}
	if r.MinimalPerSecond > 0 {
		assert.InDelta(t, r.Sustained/r.MinimalPerSecond, r.RatioToMinimal, 0.01, "the headline is payguard ÷ minimal")
	}
	if r.MinimalPerSecond > 0 && r.Sustained > 0 {
		// Temporal's side: the minimal workflow's server CPU over payguard's.
		assert.Positive(t, r.TemporalCPURatio)
		assert.Contains(t, stdout.String(), "ratio on Temporal's side (CPU)")
	}
	// Where the server's work goes: one history per ladder, the minimal
	// workflow's exactly its two local activities' markers and one signal.
	histories := map[string]History{}
	for _, h := range r.Histories {
		histories[h.Of] = h
	}
	require.Contains(t, histories, "minimal", "%+v", r.Histories)
	minimal := histories["minimal"]
	assert.Equal(t, 2, minimal.ByType["MarkerRecorded"], "%+v", minimal.ByType)
	assert.Equal(t, 1, minimal.ByType["WorkflowExecutionSignaled"], "%+v", minimal.ByType)
	assert.Zero(t, minimal.ByType["ActivityTaskScheduled"], "%+v", minimal.ByType)
	assert.Equal(t, 3, histories["no-op"].ByType["ActivityTaskScheduled"], "%+v", histories["no-op"].ByType)
	require.Contains(t, histories, "payguard")
	assert.Greater(t, histories["payguard"].Events, minimal.Events)
	assert.GreaterOrEqual(t, histories["payguard"].VisibilityWrites, 2, "its start and close at least")
	assert.LessOrEqual(t, r.QuietWaitSec, quietLimit.Seconds()+1, "the wait for a quiet server is bounded")
	require.NotEmpty(t, r.Steps)
	require.NotEmpty(t, r.APISteps, "the api phase ran the steps through the HTTP order API")
	assert.Equal(t, r.Steps[0].Offered, r.APISteps[0].Offered, "the API climbs the same rates")
	stepOrders := 0
	for _, s := range append(append([]Step{}, r.Steps...), r.APISteps...) {
		total := 0
		for _, n := range s.Final {
			total += n
		}
		assert.Equal(t, int(s.Offered*s.DurationSec), s.Launched, "every order of a step is launched")
		assert.Equal(t, s.Launched, total, "every launched order is counted once: %v", s.Final)
		assert.Positive(t, s.CPU.Server, "the dev server's CPU per order is measured")
		assert.Positive(t, s.CPU.Worker, "the worker's CPU per order is measured")
		assert.Positive(t, s.CPU.OrdersDatabase, "payguard's database's share of PostgreSQL's CPU is measured")
		assert.Positive(t, s.FirstAnswer.Count, "first answers are timed")
		// Orders still running when the step's wait ends (UNFINISHED, or
		// ERROR when the wait's own call timed out) are a matter of speed,
		// which a shared machine decides; a wrong ending is not.
		assert.Zero(t, s.Final["FAILED"]+s.Final["CANCELLED"]+s.Final["REJECTED"]+s.Final["NOT_STARTED"], "calm pgsim: %v", s.Final)
		// The database's account of the step's orders: those that reached
		// it, none lost on a calm gateway, each final one timed.
		assert.Positive(t, s.Outcomes.Orders)
		assert.LessOrEqual(t, s.Outcomes.Orders, s.Launched)
		assert.Positive(t, s.Outcomes.Final)
		assert.Equal(t, s.Outcomes.Final, s.Outcomes.FinalLatency.Count)
		assert.Zero(t, s.Outcomes.Lost, "calm pgsim: %v", s.Outcomes.LostExamples)
		stepOrders += s.Outcomes.Orders
	}
	for _, s := range r.APISteps {
		assert.Positive(t, s.CPU.API, "the API's CPU per order is measured in its steps")
	}
	for _, s := range r.Steps {
		assert.Zero(t, s.CPU.API, "the API is not part of the direct steps")
	}
	assert.Equal(t, stepOrders, r.Outcomes.Orders, "the report sums its steps, the API's too")
	if r.Sustained > 0 {
		assert.InDelta(t, r.APISustained/r.Sustained, r.APIRatio, 0.01, "api ÷ direct")
	}
	assert.Contains(t, stdout.String(), "payguard via API sustained")
	assert.Zero(t, r.Lost)
	assert.Regexp(t, `lost orders, every step \(database\) +0 of \d+ \(cancelled 0, refunded 0\)`, stdout.String())
	require.NotNil(t, r.Capacity)
	assert.Equal(t, 50, r.Capacity.Waiting, "every capacity order is left waiting (PENDING)")
	assert.Positive(t, r.Capacity.HistoryBytes)
	assert.Positive(t, r.Capacity.After.RSSMB)
	require.NotNil(t, r.Breaker)
	require.Len(t, r.Breaker.Trips, 1)
	assert.GreaterOrEqual(t, r.Breaker.Trips[0].ToOpenSec, 0.0, "the breaker opens once the gateway is down")
	assert.Equal(t, 2000, r.Breaker.OpenLookup.Count)

	svg, err := os.ReadFile(filepath.Join(out, "report.svg"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(svg), "<svg"))
	assert.Contains(t, stdout.String(), "ratio payguard / no-op")
	assert.Contains(t, stdout.String(), "ratio payguard / minimal (headline)")
}

func TestFlagsRefuseBadInputBeforeAnythingStarts(t *testing.T) {
	for _, args := range [][]string{
		{"--rates", "10,abc"}, {"--rates", "0"}, {"--step", "0s"}, {"--waiting", "0"}, {"--phases", "rates,nap"}, {"extra"},
		{"--workers", "0"}, {"--workers", "5"}, {"--temporal", "cloud"},
	} {
		_, err := parseFlags(args, noEnv, &bytes.Buffer{})
		assert.Error(t, err, "%v", args)
	}
	o, err := parseFlags([]string{"--waiting-10k", "--worker-args", "--pprof  --poll-max 2m"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 10_000, o.Waiting)
	assert.Equal(t, []string{"--pprof", "--poll-max", "2m"}, o.WorkerArgs)
}

// The refinement halves the gap to half an order a second and stops when
// nothing lies between.
func TestBetweenHalvesTheGap(t *testing.T) {
	for _, c := range []struct {
		lo, hi, want float64
		ok           bool
	}{
		{30, 35, 32.5, true}, {30, 32.5, 31.5, true}, {32.5, 35, 34, true},
		{0, 10, 5, true}, {30, 30.5, 0, false}, {31, 31.5, 0, false},
	} {
		got, ok := between(c.lo, c.hi)
		assert.Equal(t, c.ok, ok, "%v..%v", c.lo, c.hi)
		if c.ok {
			assert.Equal(t, c.want, got, "%v..%v", c.lo, c.hi)
		}
	}
}

// Every ratio is between highest sustained rates, each ladder's by the
// same rule; the headline divides by the minimal workflow's.
func TestRatiosAreBetweenHighestSustainedRates(t *testing.T) {
	r := Report{
		MinimalSteps: []Step{{Throughput: 60, Sustained: true}, {Throughput: 66, Sustained: true}, {Throughput: 70}},
		NoopSteps:    []Step{{Throughput: 30, Sustained: true}, {Throughput: 34}},
		Steps:        []Step{{Throughput: 30, Sustained: true, Latency: loadgenP99(800)}, {Throughput: 33, Sustained: true, Latency: loadgenP99(900)}, {Throughput: 46}},
	}
	r.summarise()
	assert.Equal(t, 33.0, r.Sustained)
	assert.Equal(t, 900.0, r.SustainedP99, "the p99 of the step that sets the sustained rate")
	assert.Equal(t, 66.0, r.MinimalPerSecond)
	assert.Equal(t, 30.0, r.BaselinePerSecond)
	assert.Equal(t, 0.5, r.RatioToMinimal)
	assert.Equal(t, 1.1, r.Ratio)
	assert.Zero(t, r.APIRatio, "no API steps, no API ratio")
	table := r.Table()
	assert.Regexp(t, `ratio payguard / minimal \(headline\) +0\.50×`, table)
	assert.NotContains(t, table, "ratio API / direct")

	r.MinimalSteps = nil
	r.summarise()
	assert.Zero(t, r.RatioToMinimal, "no minimal steps, no headline")
	assert.NotContains(t, r.Table(), "headline")
}

func loadgenP99(ms float64) loadgen.Percentiles { return loadgen.Percentiles{P99: ms} }

// Through the API the highest sustained step counts the same way, and is
// set against the direct one's.
func TestAPIRatioIsAgainstTheDirectSustainedRate(t *testing.T) {
	r := Report{Steps: []Step{{Offered: 20, Throughput: 20, Sustained: true}, {Offered: 30, Throughput: 29, Sustained: true}, {Offered: 35, Throughput: 30}},
		APISteps: []Step{{Offered: 20, Throughput: 19.5, Sustained: true}, {Offered: 30, Throughput: 28}, {Offered: 25, Throughput: 24.65, Sustained: true}}}
	r.summarise()
	assert.Equal(t, 29.0, r.Sustained)
	assert.Equal(t, 24.65, r.APISustained)
	assert.Equal(t, 0.85, r.APIRatio)
	table := r.Table()
	assert.Contains(t, table, "payguard via API at 25/s offered")
	assert.Regexp(t, `ratio API / direct +0\.85× +against payguard sustained 29\.0 orders/s`, table)
	assert.Contains(t, r.SVG(), "= 0.85× direct")

	r.Steps = nil
	r.summarise()
	assert.Zero(t, r.APIRatio, "no direct steps to divide by")
}

// A step not sustained (200 orders in one second is five times what this
// 2-core machine confirms in a second) leaves the dev server slower; the
// next timed phase, here the refining step, runs on it restarted. The
// restart must leave a stack that works: the refining step's orders all
// launched, counted and none ended wrongly.
func TestAStepNotSustainedRestartsTheDevServerBeforeTheNextPhase(t *testing.T) {
	r, _, stdout := runOnTheRealStack(t, "--phases", "rates", "--rates", "2,200", "--step", "1s", "--refine", "1")
	require.Len(t, r.Steps, 3, "2/s, 200/s and one refining step: %s", stdout.String())
	require.False(t, r.Steps[2].Sustained, "200 orders in a second were sustained: this machine is faster than the test assumes")
	assert.Equal(t, 1, r.Restarts, "one restart, before the refining step: %s", stdout.String())
	assert.Contains(t, stdout.String(), "restarting the dev server after a step not sustained, before the 101/s step")
	refined := r.Steps[1] // by rate: 2, 101, 200
	require.Equal(t, 101.0, refined.Offered)
	assert.Equal(t, 101, refined.Launched)
	assert.Zero(t, refined.Final["FAILED"]+refined.Final["CANCELLED"]+refined.Final["REJECTED"]+refined.Final["NOT_STARTED"],
		"the restarted server took every order: %v", refined.Final)
	assert.Positive(t, refined.Final["CONFIRMED"], "orders were confirmed after the restart: %v; %s", refined.Final, stdout.String())
	assert.Positive(t, refined.CPU.Server, "the restarted server's CPU is measured")
}

// runOnTheRealStack runs the bench with args against freshly built pgsim
// and worker binaries, and returns its report, its output directory and
// what it printed.
func runOnTheRealStack(t *testing.T, args ...string) (Report, string, *bytes.Buffer) {
	t.Helper()
	testenv.NeedsServices(t, "the dev server, PostgreSQL, pgsim and worker binaries")
	bin := t.TempDir()
	for _, pkg := range []string{"./pgsim", "./worker", "./api"} {
		require.NoError(t, os.Rename(testenv.BuildBinary(t, pkg), filepath.Join(bin, filepath.Base(pkg))))
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	err := Run(ctx, append(args, "--bin", bin, "--out", out), noEnv, &stdout, &stdout)
	require.NoError(t, err, stdout.String())
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var r Report
	require.NoError(t, json.Unmarshal(raw, &r))
	return r, out, &stdout
}
func noEnv(string) string { return "" }
