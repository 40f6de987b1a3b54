package stack_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
)

// A service that cannot start ends Start with that service's error — no
// panic hiding it — and what was set up (the run's database) is gone.
func TestStartReportsAServiceThatCannotStart(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL")
	ctx := context.Background()
	db := "payguard_chaos_start_fails_" + strings.ReplaceAll(testenv.ID("x"), "-", "_")
	missing := filepath.Join(t.TempDir(), "no-such-temporal")
	var err error
	require.NotPanics(t, func() {
		_, err = stack.Start(ctx, stack.Options{TemporalCLI: missing, Out: t.TempDir(), AdminDBURL: devserver.AdminDatabaseURL(),
			DatabaseName: db, Workers: 1})
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-temporal", "the error names what failed")

	admin, err := pgx.Connect(ctx, devserver.AdminDatabaseURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, db).Scan(&n))
	assert.Zero(t, n, "the run's database dropped")
}
