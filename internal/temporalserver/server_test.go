package temporalserver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/workflows"
)

// The real server starts on a fresh pair of databases set up by
// temporal-sql-tool, with the namespace and payguard's search attributes:
// a workflow started with them is found by them in visibility, and a
// restart keeps it.
func TestServerStartsOnFreshDatabases(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL and the Temporal server binaries")
	bin, tool, err := temporalserver.Binaries()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	dbs := temporalserver.NewDatabases(devserver.AdminDatabaseURL(), "pkgtest_"+hex.EncodeToString(b))
	t.Cleanup(func() { assert.NoError(t, dbs.Drop(context.Background())) })
	require.NoError(t, dbs.Setup(ctx, tool))
	require.NoError(t, dbs.Setup(ctx, tool), "a second setup of databases at the latest version changes nothing")

	settings, err := temporalserver.DefaultSettings()
	require.NoError(t, err)
	settings, err = dbs.Settings(settings)
	require.NoError(t, err)
	settings.PortBase, err = temporalserver.FreePortBase()
	require.NoError(t, err)
	out := t.TempDir()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Binary: bin, Settings: settings, Out: out,
		DynamicConfig: map[string]any{"matching.maxDeployments": 500}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("server log: %s", srv.LogPath())

	cl, err := client.DialContext(ctx, client.Options{HostPort: srv.Addr, Namespace: temporalserver.Namespace})
	require.NoError(t, err)
	defer cl.Close()
	attrs, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: temporalserver.Namespace})
	require.NoError(t, err)
	for name := range temporalserver.SearchAttributes() {
		assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[name], name)
	}

	id := "probe-" + hex.EncodeToString(b)
	_, err = cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-" + id,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.OrderStatusKey.ValueSet("PROBE"))}, "Nothing")
	require.NoError(t, err)
	findByStatus := func() bool {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: temporalserver.Namespace, Query: workflows.OrderStatusKey.GetName() + " = 'PROBE'"})
		return err == nil && len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetWorkflowId() == id
	}
	testenv.Eventually(t, 30*time.Second, findByStatus, "the workflow found by its OrderStatus")

	require.NoError(t, srv.Restart(ctx))
	testenv.Eventually(t, 60*time.Second, findByStatus, "the workflow still there after a restart")
	require.NoError(t, cl.TerminateWorkflow(ctx, id, "", "done"))
}
