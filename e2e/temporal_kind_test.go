package e2e_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/internal/testenv"
)

// The suite runs on the Temporal PAYGUARD_TEMPORAL asks for: the real
// server keeps its history on PostgreSQL, the dev server on SQLite. Were
// the switch ignored, `make test-server` would test the dev server twice.
func TestTemporalIsTheKindAsked(t *testing.T) {
	kind, err := temporalserver.ParseKind(os.Getenv(temporalserver.KindEnv))
	require.NoError(t, err)
	info, err := testenv.Temporal(t).WorkflowService().GetClusterInfo(context.Background(), &workflowservice.GetClusterInfoRequest{})
	require.NoError(t, err)
	want := map[temporalserver.Kind]string{temporalserver.KindDev: "sqlite", temporalserver.KindServer: "postgres12"}[kind]
	assert.Equal(t, want, info.GetPersistenceStore(), "the %s's persistence", kind)
	assert.Equal(t, want, info.GetVisibilityStore(), "the %s's visibility store", kind)
}
