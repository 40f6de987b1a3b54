package service

import (
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

func TestCapacityKnobsDefaultsAndThePoolSize(t *testing.T) {
	getenv := func(string) string { return "" }
	c, err := ParseFlags(nil, getenv, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.DBMaxConns+c.TaskPollers)
	assert.Equal(t, DefaultStickyCacheSize, c.StickyCacheSize, "the sticky cache is payguard's own size, not the SDK's 10 000")
	assert.False(t, c.Pprof)
	assert.Equal(t, c.DatabaseURL, c.databaseURL(), "no pool size: the URL as given")
	opts := c.workerOptions()
	assert.Equal(t, worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: 2, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: 2}), opts.WorkflowTaskPollerBehavior,
		"two workflow task polls at most on each queue, in pools of their own: fixed pollers can leave the order queue with none (workerOptions)")
	assert.Zero(t, opts.MaxConcurrentWorkflowTaskPollers, "the SDK refuses a poller count beside a poller behaviour")
	assert.Zero(t, opts.MaxConcurrentActivityTaskPollers, "the SDK's activity pollers")

	c, err = ParseFlags([]string{"--db-max-conns", "24", "--task-pollers", "4", "--sticky-cache-size", "500", "--pprof"}, getenv, io.Discard)
	require.NoError(t, err)
	pc, err := pgxpool.ParseConfig(c.databaseURL())
	require.NoError(t, err)
	assert.EqualValues(t, 24, pc.MaxConns, "pgx reads the pool size from the URL")
	assert.Equal(t, "payguard", pc.ConnConfig.Database, "the rest of the URL is kept")
	opts = c.workerOptions()
	assert.Equal(t, worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: 4, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: 4}), opts.WorkflowTaskPollerBehavior,
		"up to 4 on each queue")
	assert.Equal(t, 4, opts.MaxConcurrentActivityTaskPollers)
	assert.True(t, c.Pprof)

	for _, bad := range []string{"--db-max-conns", "--sticky-cache-size", "--task-pollers"} {
		_, err := ParseFlags([]string{bad, "-1"}, getenv, io.Discard)
		assert.Error(t, err, bad)
	}
}
