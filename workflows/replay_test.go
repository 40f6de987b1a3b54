package workflows_test

import (
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/workflows"
)

// The paths of every workflow recorded from real runs (make
// record-histories) into testdata/: PaymentWorkflow's, then the recovery's,
// the sweep's and a customer's refund.
var recordedPaths = []string{
	"callback_success", "poll_success", "callback_failed", "rejected", "out_of_stock",
	"unknown_then_found", "breaker_open_then_success", "deadline_compensation", "operator_cancel",
	"resend_after_grace", "create_waits_for_database", "cancel_during_reserve", "invalid_id_refused",
	"lookup_hint", "settle_outlasts_local_tries", "create_outlasts_local_tries", "cancel_during_refused_create",
	"recovery_success", "recovery_of_final_order", "reconcile_sweep", "refund_order",
}

func replayLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// testdataCodecKeys is the test-only key ring the histories were recorded
// with (make record-histories): their payloads are encrypted, as every
// payguard worker's are.
const testdataCodecKeys = "testdata/codec-test-keys"

// newReplayer is a replayer with the payload codec of the recorded
// histories; it decodes histories recorded before encryption too, whose
// payloads carry no encryption metadata.
func newReplayer(t *testing.T) worker.WorkflowReplayer {
	t.Helper()
	keys, err := codec.LoadKeys("", testdataCodecKeys)
	require.NoError(t, err)
	cd, err := codec.New(keys)
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: cd.DataConverter(), FailureConverter: cd.FailureConverter()})
	require.NoError(t, err)
	return r
}

// Every recorded history must replay against today's workflow code: a
// change that alters the commands a recorded path issues fails here, and
// ships as a new build (docs/rollout.md), not as a change to this one.
func TestRecordedHistoriesReplay(t *testing.T) {
	for _, name := range recordedPaths {
		path := filepath.Join("testdata", name+".json")
		t.Run(name, func(t *testing.T) {
			_, err := os.Stat(path)
			require.NoError(t, err, "recorded history missing: run `make record-histories`")
			r := newReplayer(t)
			workflows.New(workflows.DefaultTuning()).Register(r)
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			// Replayed under its recorded id: RecoverWorkflow checks it.
			started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			exec := workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()}
			if exec.ID == "" {
				exec.ID = "ReplayId"
			}
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(replayLogger(), h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: exec}))
		})
	}
}

// The replay check is only worth having if it catches a non-deterministic
// change: a PaymentWorkflow that runs one extra activity first must fail.
func TestReplayCatchesANonDeterministicChange(t *testing.T) {
	real := workflows.New(workflows.DefaultTuning())
	changed := func(ctx workflow.Context, in workflows.PaymentInput) (workflows.State, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
		_ = workflow.ExecuteActivity(ctx, "AuditOrder", in.OrderID).Get(ctx, nil)
		return real.Payment(ctx, in)
	}
	for _, name := range []string{"callback_success", "deadline_compensation"} {
		r := newReplayer(t)
		r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: workflows.PaymentWorkflowName})
		err := r.ReplayWorkflowHistoryFromJSONFile(replayLogger(), filepath.Join("testdata", name+".json"))
		require.Error(t, err, name)
		// TMPRL1100 is the SDK's code for non-determinism.
		assert.True(t, strings.Contains(err.Error(), "TMPRL1100"), "a non-determinism error, got: %v", err)
	}
}

// The recorded histories hold no card number in clear: every payload the
// workers wrote is encrypted.
func TestRecordedHistoriesAreEncrypted(t *testing.T) {
	const card = "1234-5678-9814-1451"
	require.NotEmpty(t, testenv.CardInClear(`{"cardNo":"`+card+`"}`, card), "the check finds a card where there is one")
	for _, name := range recordedPaths {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		require.NoError(t, err)
		text := string(raw)
		assert.Empty(t, testenv.CardInClear(text, card), "%s: no card data in clear", name)
		assert.True(t, strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted))), "%s: encrypted payloads", name)
	}
}

// Without the key, an encrypted history does not replay, and its payloads
// decode to an error naming the key it lacks, never to garbage.
func TestEncryptedHistoryNeedsItsKey(t *testing.T) {
	keys, err := codec.ParseKeys(codec.NewKey("other"))
	require.NoError(t, err)
	wrong, err := codec.New(keys)
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: wrong.DataConverter(), FailureConverter: wrong.FailureConverter()})
	require.NoError(t, err)
	workflows.New(workflows.DefaultTuning()).Register(r)
	path := filepath.Join("testdata", "callback_success.json")
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(replayLogger(), path))

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	input := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput()
	var in workflows.PaymentInput
	err = wrong.DataConverter().FromPayloads(input, &in)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `payload encrypted with key "replay-test-1", which this process does not have (its keys: other)`)
	assert.Empty(t, in.CardNo)

	keys, err = codec.LoadKeys("", testdataCodecKeys)
	require.NoError(t, err)
	right, err := codec.New(keys)
	require.NoError(t, err)
	require.NoError(t, right.DataConverter().FromPayloads(input, &in))
	assert.Equal(t, "1234-5678-9814-1451", in.CardNo)
}

// A happy-path order asks the server for no activity: Reserve, the create,
// the callback's verification and Settle run as local activities inside the workflow tasks around the
// callback, and the only search-attribute upserts are the status changes
// after RESERVING (which the starter sets at start): REQUESTING is never
// published when the create answers inside the task that sent it. The wait
// keeps one timer, the next poll's, which is the deadline's too.
func TestHappyPathSchedulesNoActivity(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "callback_success.json"))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	var scheduled []string
	var localActivities, upserts, tasks, timers int
	for _, e := range h.Events {
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			scheduled = append(scheduled, e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		case e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity":
			localActivities++
		case e.GetUpsertWorkflowSearchAttributesEventAttributes() != nil:
			upserts++
		case e.GetWorkflowTaskCompletedEventAttributes() != nil:
			tasks++
		case e.GetTimerStartedEventAttributes() != nil:
			timers++
		}
	}
	assert.Empty(t, scheduled)
	assert.Equal(t, 1, timers, "the next poll, which is the deadline's too")
	assert.Equal(t, 4, localActivities, "Reserve, the create, the callback's verification and Settle")
	assert.Equal(t, 2, upserts, "PENDING, CONFIRMED")
	assert.Equal(t, 2, tasks, "start, callback")
}
