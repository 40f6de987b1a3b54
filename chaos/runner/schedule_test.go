package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var testLinks = []string{"worker-postgres", "worker-pgsim", "worker-temporal", "pgsim-worker1", "pgsim-worker2"}

// A seed is a replay: the same seed plans the same faults at the same offsets.
func TestPlanIsTheSeedsAlone(t *testing.T) {
	a := Plan(7, time.Minute, testLinks, 2)
	b := Plan(7, time.Minute, []string{"pgsim-worker2", "pgsim-worker1", "worker-temporal", "worker-pgsim", "worker-postgres"}, 2)
	assert.Equal(t, a, b, "link order must not matter")
	assert.NotEqual(t, a, Plan(8, time.Minute, testLinks, 2))
}

func TestPlanHasEveryClassWithinTheRun(t *testing.T) {
	for seed := range uint64(50) {
		plan := Plan(seed, 40*time.Second, testLinks, 2)
		kinds := map[string]bool{}
		restarts := 0
		for _, f := range plan {
			kinds[f.Kind] = true
			assert.GreaterOrEqual(t, f.At, 0.0)
			assert.LessOrEqual(t, f.At, 40.0*0.8+0.1)
			if f.Kind == TemporalRestart {
				restarts++
			}
		}
		assert.True(t, kinds[WorkerKill] && kinds[PostgresTerminate] && kinds[TemporalRestart], "seed %d: %v", seed, kinds)
		assert.Equal(t, 1, restarts, "seed %d: one dev-server restart per minute at most", seed)
	}
}

// No link fault is on a link while one of its ends is cut (toxiproxy cannot
// always take a toxic off a link whose connections died), and link faults
// still make up a good part of every plan.
func TestLinkFaultsNeverOverlapACutOfTheirLink(t *testing.T) {
	withLinks := 0
	for seed := range uint64(200) {
		plan := Plan(seed, 40*time.Second, testLinks, 2)
		for _, f := range plan {
			if !isLink(f.Kind) {
				continue
			}
			withLinks++
			for _, k := range plan {
				if cuts(k, f.Target) {
					overlap := k.At <= f.At+f.For && f.At <= k.At+k.For
					assert.False(t, overlap, "seed %d: %s %s [%v+%v] overlaps %s %s [%v+%v]", seed, f.Kind, f.Target, f.At, f.For, k.Kind, k.Target, k.At, k.For)
				}
			}
		}
	}
	assert.Greater(t, withLinks, 200, "link faults are still drawn")
	assert.True(t, cuts(Fault{Kind: TemporalRestart}, "worker-temporal"))
	assert.True(t, cuts(Fault{Kind: WorkerKill, Target: "worker2"}, "pgsim-worker2"))
	assert.False(t, cuts(Fault{Kind: WorkerKill, Target: "worker2"}, "pgsim-worker1"))
	assert.False(t, cuts(Fault{Kind: PgsimDown}, "worker-postgres"))
}
