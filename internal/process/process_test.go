package process_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/testenv"
)

func readLog(t *testing.T, p *process.Process) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	return string(b)
}

// A child runs until stopped, its output goes to its log, and a restart
// appends to the log unless FreshLog asks for a new one.
func TestStartStopAndRestartKeepOrTruncateTheLog(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		p := &process.Process{Name: "child", Path: "/bin/sh", Args: []string{"-c", `echo "up $GREETING"; exec sleep 60`},
			Env: []string{"GREETING=hello"}, LogDir: t.TempDir(), FreshLog: fresh}
		for run := 1; run <= 2; run++ {
			require.NoError(t, p.Start())
			require.Error(t, p.Start(), "already running")
			lines := run // this run's line, after the earlier runs' ones
			if fresh {
				lines = 1
			}
			require.NoError(t, p.WaitFor(context.Background(), 10*time.Second, "output", func(context.Context) bool {
				return strings.Count(readLog(t, p), "up hello") >= lines
			}))
			assert.True(t, p.Running())
			require.NoError(t, p.Stop(5*time.Second))
			assert.False(t, p.Running())
			require.NoError(t, p.Stop(time.Second), "stopping a stopped child does nothing")
		}
		want := 2
		if fresh {
			want = 1
		}
		assert.Equal(t, want, strings.Count(readLog(t, p), "up hello"), "fresh log: %v", fresh)
	}
}

// A child that dies before it is ready is reported at once, naming its log.
func TestWaitForReportsAChildThatExited(t *testing.T) {
	p := &process.Process{Name: "dies", Path: "/bin/sh", Args: []string{"-c", "exit 3"}, LogDir: t.TempDir()}
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Kill() })
	err := p.WaitFor(context.Background(), time.Minute, "health", func(context.Context) bool { return false })
	require.ErrorContains(t, err, "dies exited before health")
	assert.ErrorContains(t, err, p.LogPath())
}

// A busy child's CPU time grows; a stopped one reads 0.
func TestCPUTimeCountsTheChildsWork(t *testing.T) {
	p := &process.Process{Name: "busy", Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}, LogDir: t.TempDir()}
	assert.Zero(t, p.CPUTime(), "not started")
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Kill() })
	require.NoError(t, p.WaitFor(context.Background(), 30*time.Second, "CPU time", func(context.Context) bool {
		return p.CPUTime() >= 50*time.Millisecond
	}))
	require.NoError(t, p.Kill())
	assert.Zero(t, p.CPUTime(), "stopped")
}

// CPU time is read finer than /proc's 10 ms ticks, so that a few orders'
// work in a short bench step is not read as none.
func TestCPUTimeIsFinerThanATick(t *testing.T) {
	p := &process.Process{Name: "busy", Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}, LogDir: t.TempDir()}
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Kill() })
	var readings []time.Duration
	require.NoError(t, p.WaitFor(context.Background(), 30*time.Second, "a reading between ticks", func(context.Context) bool {
		d := p.CPUTime()
		readings = append(readings, d)
		return d > 0 && d%(10*time.Millisecond) != 0
	}), "%v", readings)
}

// CommandCPUTime counts a running process by its command name, and no
// process by a name none has.
func TestCommandCPUTimeCountsProcessesByName(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	comm := strings.TrimSpace(string(raw))
	// Spend CPU until this process has used at least 50 ms, as getrusage says.
	for n := 0; process.SelfCPUTime() < 50*time.Millisecond; n++ {
		_ = strings.Repeat("x", n%1000)
	}
	assert.GreaterOrEqual(t, process.CommandCPUTime(comm), 40*time.Millisecond, "this test binary is a process named %q", comm)
	assert.Zero(t, process.CommandCPUTime("no-such-command-here"))
}

// A database's backends are told apart by their titles: a query's work is
// counted to its own database and to no other.
func TestPostgresDatabaseCPUTimeCountsItsOwnBackends(t *testing.T) {
	ctx := context.Background()
	busyURL, idleURL := testenv.NewDatabase(t), testenv.NewDatabase(t)
	busy, err := pgx.Connect(ctx, busyURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close(ctx) })
	idle, err := pgx.Connect(ctx, idleURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = idle.Close(ctx) })
	busyDB, idleDB := busy.Config().Database, idle.Config().Database

	busyBefore, idleBefore := process.PostgresDatabaseCPUTime(busyDB), process.PostgresDatabaseCPUTime(idleDB)
	_, err = busy.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)")
	require.NoError(t, err)
	assert.Greater(t, process.PostgresDatabaseCPUTime(busyDB)-busyBefore, 20*time.Millisecond, "the busy database's backend")
	assert.Less(t, process.PostgresDatabaseCPUTime(idleDB)-idleBefore, 5*time.Millisecond, "the idle one's")
	assert.Zero(t, process.PostgresDatabaseCPUTime("no_such_database"))
}
