package workflows_test

import (
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// The paths of PaymentWorkflow recorded from real runs (make record-histories)
// into testdata/.
var recordedPaths = []string{
	"callback_success", "poll_success", "callback_failed", "rejected", "out_of_stock",
	"unknown_then_found", "breaker_open_then_success", "deadline_compensation", "operator_cancel",
	"resend_after_grace", "create_waits_for_database", "cancel_during_reserve", "invalid_id_refused",
	"lookup_hint",
}

// Paths that exist from money-safety version 2 on (testdata/, testdata/v4/,
// testdata/v3/ and testdata/v2/), from version 3 on (testdata/,
// testdata/v4/ and testdata/v3/), and from version 4 on (testdata/ and
// testdata/v4/).
var (
	recordedSinceLocalSteps     = []string{"settle_outlasts_local_tries"}
	recordedSinceLocalCreate    = []string{"create_outlasts_local_tries"}
	recordedSinceReserveRecalls = []string{"cancel_during_refused_create"}
)

// The recovery and the sweep, recorded beside the payment paths
// (testdata/); and a recovery over a final order as recorded before it
// published the order's statuses (testdata/before-recovery-publishes-final/).
var (
	recordedOtherWorkflows          = []string{"recovery_success", "recovery_of_final_order", "reconcile_sweep"}
	recordedBeforeRecoveryPublishes = []string{"recovery_of_final_order"}
)

// The paths as recorded at money-safety version 2, before the create
// became a local activity (testdata/v2/).
var recordedLocalSteps = append(slices.Clone(recordedPaths), recordedSinceLocalSteps...)

// The paths as recorded at money-safety version 3, before Reserve's answer
// told a run of the first task again about creates begun (testdata/v3/).
var recordedLocalCreate = slices.Concat(recordedPaths, recordedSinceLocalSteps, recordedSinceLocalCreate)

// The paths as recorded at money-safety version 4, before a compensation
// told CancelOrder whether it had searched the gateway (testdata/v4/).
var recordedReserveRecalls = slices.Concat(recordedPaths, recordedSinceLocalSteps, recordedSinceLocalCreate, recordedSinceReserveRecalls)

// The same paths as recorded before the money-safety version (testdata/v0/):
// runs started then still replay on the code they ran.
var recordedBeforeMoneySafety = []string{
	"callback_success", "poll_success", "callback_failed", "rejected", "out_of_stock",
	"unknown_then_found", "breaker_open_then_success", "deadline_compensation", "operator_cancel",
}

// The same paths, and the breaker-timed poll, as recorded at the
// money-safety version before the database steps became local activities
// (testdata/v1/): runs started then still replay on the code they ran.
var recordedMoneySafe = append(slices.Clone(recordedPaths), "breaker_timed_poll")

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
// change that alters the commands of a released workflow without
// workflow.GetVersion fails here.
func TestRecordedHistoriesReplay(t *testing.T) {
	var paths []string
	for _, name := range recordedPaths {
		paths = append(paths, filepath.Join("testdata", name+".json"))
	}
	for _, name := range slices.Concat(recordedSinceLocalSteps, recordedSinceLocalCreate, recordedSinceReserveRecalls, recordedOtherWorkflows) {
		paths = append(paths, filepath.Join("testdata", name+".json"))
	}
	for _, name := range recordedReserveRecalls {
		paths = append(paths, filepath.Join("testdata", "v4", name+".json"))
	}
	for _, name := range recordedLocalCreate {
		paths = append(paths, filepath.Join("testdata", "v3", name+".json"))
	}
	for _, name := range recordedBeforeRecoveryPublishes {
		paths = append(paths, filepath.Join("testdata", "before-recovery-publishes-final", name+".json"))
	}
	for _, name := range recordedLocalSteps {
		paths = append(paths, filepath.Join("testdata", "v2", name+".json"))
	}
	for _, name := range recordedMoneySafe {
		paths = append(paths, filepath.Join("testdata", "v1", name+".json"))
	}
	for _, name := range recordedBeforeMoneySafety {
		paths = append(paths, filepath.Join("testdata", "v0", name+".json"))
	}
	paths = append(paths, filepath.Join("testdata", "before_encryption_callback_success.json"))
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			_, err := os.Stat(path)
			require.NoError(t, err, "recorded history missing: run `make record-histories`")
			r := newReplayer(t)
			workflows.New(workflows.DefaultTuning()).Register(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(replayLogger(), path))
		})
	}
}

// An order started before the id rule with an id the rule now refuses — a
// 100-character order id the starter and pgsim took at 4d38b0d, recorded
// there going all the way to CONFIRMED — still replays: setup asks for the
// rule's version only when it would refuse, and a history without that
// marker replays the commands it ran. `make record-histories` cannot
// re-record it (today's code refuses the id), so it is kept as recorded.
func TestHistoryFromBeforeTheIDRuleReplays(t *testing.T) {
	r := newReplayer(t)
	workflows.New(workflows.DefaultTuning()).Register(r)
	require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(replayLogger(), filepath.Join("testdata", "legacy_long_order_id.json")))
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
// workers wrote is encrypted. The one recorded before encryption, kept to
// prove such histories still replay, is the exception it is named for.
func TestRecordedHistoriesAreEncrypted(t *testing.T) {
	for _, name := range slices.Concat(recordedPaths, recordedSinceLocalSteps, recordedSinceLocalCreate, recordedSinceReserveRecalls, recordedOtherWorkflows) {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		require.NoError(t, err)
		text := string(raw)
		assert.Empty(t, testenv.CardInClear(text, "1234-5678-9814-1451"), "%s: no card data in clear", name)
		assert.True(t, strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted))), "%s: encrypted payloads", name)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "before_encryption_callback_success.json"))
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(raw), base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted))))
	assert.NotEmpty(t, testenv.CardInClear(string(raw), "1234-5678-9814-1451"), "the check above finds a card where there is one")
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

// A happy-path order asks the server for no activity: Reserve, the create
// and Settle run as local activities inside the workflow tasks around the
// callback (versionMoneySafety's localCreate), and the only search-attribute
// upserts are the SDK's version marker's and the status changes after
// RESERVING (which the starter sets at start): REQUESTING is never
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
	assert.Equal(t, 3, localActivities, "Reserve, the create and Settle")
	assert.Equal(t, 3, upserts, "version marker, PENDING, CONFIRMED")
	assert.Equal(t, 2, tasks, "start, callback")
}
