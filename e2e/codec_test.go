package e2e_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The starter's default card number, which every order here pays with.
const cardNo = "1234-5678-9814-1451"

func inClear(text string) string { return testenv.CardInClear(text, cardNo) }

// Card data never reaches Temporal in clear: an order placed with the real
// starter and settled by the real worker (signal, query, activity inputs
// and results, summaries), and one started with a memo, read back straight
// from Temporal without the codec — with the temporal CLI and with a raw
// client — show no card number; with the codec the same payloads decode.
func TestCardDataNeverInClearInTemporal(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), nil)
	setStock(t, s, "P1", 10)
	ctx := context.Background()
	placeOrder(t, s, "enc-order-1", "P1", 1, "--card-no", cardNo)
	o := waitOrder(t, s, "enc-order-1", status.OrderPending, 30*time.Second)
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", true)
	waitOrder(t, s, "enc-order-1", status.OrderConfirmed, 30*time.Second)
	assert.Equal(t, o.TransactionKey, workflowState(t, s, "enc-order-1").TransactionKey, "the query answers through the codec")

	memoRun, err := testenv.Temporal(t).ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.PaymentWorkflowID("enc-memo-order"),
		TaskQueue: s.TaskQueue, Memo: map[string]any{"card": cardNo}}, workflows.PaymentWorkflowName,
		workflows.PaymentInput{OrderID: "enc-memo-order", ProductID: "P1", Quantity: 1000, Amount: 5000, UserID: "u", CardType: "SAMSUNG", CardNo: cardNo})
	require.NoError(t, err)
	_ = memoRun.Get(ctx, nil) // out of stock: rejected at once
	var ids []string
	for _, id := range []string{"enc-order-1", "enc-memo-order"} {
		ids = append(ids, workflows.PaymentWorkflowID(id))
	}

	cliPath, err := devserver.TemporalCLI()
	require.NoError(t, err)
	for _, id := range ids {
		for _, args := range [][]string{{"workflow", "show", "--output", "json"}, {"workflow", "describe", "--output", "json"}, {"workflow", "show"}} {
			out, err := exec.Command(cliPath, append(args, "--workflow-id", id, "--address", s.Config.TemporalAddress, "--namespace", "default")...).CombinedOutput()
			require.NoError(t, err, string(out))
			assert.Empty(t, inClear(string(out)), "temporal %v of %s shows card data", args, id)
		}
	}
	show, err := exec.Command(cliPath, "workflow", "show", "--output", "json", "--workflow-id", ids[0], "--address", s.Config.TemporalAddress).Output()
	require.NoError(t, err)
	assert.Contains(t, string(show), base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted)), "payloads are encrypted, not absent")

	// Every payload of every event, through a client without the codec.
	raw := testenv.RawTemporal(t)
	payloads := 0
	for _, id := range ids {
		it := raw.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			text, err := protojson.Marshal(e)
			require.NoError(t, err)
			assert.Empty(t, inClear(string(text)), "event %d %s of %s", e.GetEventId(), e.GetEventType(), id)
			payloads += strings.Count(string(text), `"metadata"`)
		}
		desc, err := raw.DescribeWorkflow(ctx, id, "")
		require.NoError(t, err)
		text, _ := protojson.Marshal(desc.RawResponse)
		assert.Empty(t, inClear(string(text)), "describe (memo) of %s", id)
	}
	assert.Greater(t, payloads, 10)

	// Without the codec a payload cannot be read; with it, it is the order.
	q, err := raw.QueryWorkflow(ctx, ids[0], "", workflows.StateQuery)
	require.NoError(t, err)
	var st workflows.State
	assert.Error(t, q.Get(&st), "an encrypted query answer is not JSON")
	desc, err := testenv.Temporal(t).DescribeWorkflow(ctx, ids[1], "")
	require.NoError(t, err)
	var memo string
	require.NoError(t, testenv.Codec().DataConverter().FromPayload(desc.RawResponse.GetWorkflowExecutionInfo().GetMemo().GetFields()["card"], &memo))
	assert.Equal(t, cardNo, memo)
}

// The worker's codec server decodes what Temporal holds, on the worker's
// port, in the UI's protocol, for whoever presents its bearer token.
func TestWorkerServesTheCodec(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.CodecToken = "tok" })
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: "http://" + s.Worker.Addr() + codec.Endpoint,
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("X-Namespace", "default")
			r.Header.Set("Authorization", "Bearer tok")
			return nil
		}})
	in := workflows.PaymentInput{OrderID: "o-codec-1", Amount: 5000, CardType: "KB", CardNo: cardNo}
	plain, err := converter.GetDefaultDataConverter().ToPayload(in)
	require.NoError(t, err)
	enc, err := testenv.Codec().Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	dec, err := remote.Decode(enc)
	require.NoError(t, err)
	var shown workflows.PaymentInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &shown))
	in.CardNo = "****1451"
	assert.Equal(t, in, shown, "decoded for a person: everything, the card masked")

	noToken := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: "http://" + s.Worker.Addr() + codec.Endpoint})
	_, err = noToken.Decode(enc)
	assert.ErrorContains(t, err, "bearer token")
}
