package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/pgsim/simulator"
)

// I8's bound comes from the chaos workers' flags as the worker parses
// them: its defaults fill in what chaos leaves out (the create breaker's
// open, longer than the lookup breaker's 3 s).
func TestTimingsAreTheWorkersFlags(t *testing.T) {
	calm := simulator.DefaultFaults()
	calm.Processing.Max = simulator.Duration(2 * time.Second)
	tm, err := timings(workerArgs(Options{}), calm)
	require.NoError(t, err)
	assert.Equal(t, check.Timings{ConnectTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, UnknownGrace: 3 * time.Second,
		AnsweredGrace: time.Second, PollMax: 3 * time.Second, BreakerOpen: 5 * time.Second, Decision: 2 * time.Second}, tm)
	assert.Equal(t, 23*time.Second, check.LongEnough(tm))

	_, err = timings([]string{"--poll-max", "soon"}, calm)
	assert.Error(t, err, "flags the worker refuses are refused here")
}

// Only applied faults on the way to the gateway cut it, each for as long as
// it lasted.
func TestUnreachableStretchesAreTheFaultsThatCutTheGateway(t *testing.T) {
	began := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	plan := []Fault{
		{ID: "f01", Kind: PgsimDown, Target: "pgsim", At: 5, For: 4, Applied: true, EndedAt: 9.1},
		{ID: "f02", Kind: LinkReset, Target: "worker-pgsim", At: 10, For: 2, Applied: false},
		{ID: "f03", Kind: LinkLatency, Target: "pgsim-worker1", At: 11, For: 3, Applied: true, EndedAt: 14},
		{ID: "f04", Kind: TemporalRestart, Target: "temporal", At: 20, For: 0, Applied: true, EndedAt: 26.5},
		{ID: "f05", Kind: PgsimCreated500, Target: "pgsim", At: 21, For: 5, Applied: true, EndedAt: 26},
		{ID: "f06", Kind: CallbacksLost, Target: "pgsim", At: 22, For: 5, Applied: true, EndedAt: 27},
		{ID: "f07", Kind: LinkTimeout, Target: "worker-postgres", At: 30, For: 3, Applied: true},
		{ID: "f08", Kind: PostgresTerminate, Target: "postgres", At: 35, Applied: true, EndedAt: 37},
		{ID: "f09", Kind: WorkerKill, Target: "worker1", At: 40, For: 6, Applied: true, EndedAt: 47},
	}
	got := unreachable(plan, began)
	var ids []string
	for _, s := range got {
		ids = append(ids, s.Why)
	}
	assert.Equal(t, []string{"f01 pgsim-down pgsim", "f04 temporal-restart temporal", "f07 link-blackhole worker-postgres",
		"f09 worker-kill worker1"}, ids)
	require.Len(t, got, 4)
	assert.Equal(t, [2]time.Time{began.Add(5 * time.Second), began.Add(9100 * time.Millisecond)}, [2]time.Time{got[0].From, got[0].To})
	assert.Equal(t, began.Add(26500*time.Millisecond), got[1].To, "a restart lasts as long as it took")
	assert.Equal(t, began.Add(33*time.Second), got[2].To, "not yet ended: its planned length")
}

func TestPlansDrawTheCreatedThen500Fault(t *testing.T) {
	seen := 0
	for seed := range uint64(100) {
		for _, f := range Plan(seed, time.Minute, testLinks, 2) {
			if f.Kind == PgsimCreated500 {
				seen++
				assert.Equal(t, "pgsim", f.Target)
			}
		}
	}
	assert.Positive(t, seen, "a pgsim fault among the others")
}
