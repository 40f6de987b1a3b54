package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/workflows"
)

var sw *activities.Sweeper

func newSweepEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	workflows.New(workflows.DefaultTuning()).Register(env)
	env.RegisterActivity(a)
	env.RegisterActivity(sw)
	return env
}

// A batch that is not the last continues as new from its cursor with the
// summary so far: no sweep grows one long history.
func TestReconcileContinuesAsNewBetweenBatches(t *testing.T) {
	env := newSweepEnv(t)
	next := activities.Cursor{UpdatedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), OrderID: "o100"}
	env.OnActivity(sw.SweepBatch, mock.Anything, mock.Anything).Return(activities.SweepBatchResult{
		Findings: []activities.Finding{{OrderID: "ord-o7", Finding: activities.FindingWorkflowGone, Action: activities.ActionRecover}},
		Checked:  100, Next: next}, nil).Once()
	env.ExecuteWorkflow(workflows.ReconcileWorkflowName, workflows.ReconcileInput{DryRun: true})

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	var in workflows.ReconcileInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	assert.Equal(t, next, in.After)
	assert.Equal(t, workflows.DefaultReconcileWindow, in.Window)
	assert.Equal(t, in.Until.Add(-in.Window), in.Since)
	require.NotNil(t, in.Summary)
	assert.Equal(t, 100, in.Summary.Checked)
	assert.Equal(t, []activities.SweepCount{{Finding: activities.FindingWorkflowGone, Action: activities.ActionRecover, N: 1}}, in.Summary.Counts)
	assert.Empty(t, in.Summary.Findings[0].Result, "a dry run fixes nothing")
}

// The last batch ends the sweep; a dry run reports no metrics.
func TestReconcileDryRunEnds(t *testing.T) {
	env := newSweepEnv(t)
	env.OnActivity(sw.SweepBatch, mock.Anything, mock.Anything).Return(activities.SweepBatchResult{Checked: 3, Done: true, Skipped: true}, nil).Once()
	env.ExecuteWorkflow(workflows.ReconcileWorkflowName, workflows.ReconcileInput{DryRun: true, Window: time.Hour})
	require.NoError(t, env.GetWorkflowError())
	var res workflows.ReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, 1, res.SkippedBatches)
	assert.Equal(t, time.Hour, res.Window)
	env.AssertExpectations(t)
}
