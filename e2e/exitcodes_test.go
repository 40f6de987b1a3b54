package e2e_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/testenv"
)

// The real starter binary against a real stack: `order --wait` exits with
// the order's end, so a script tells a declined payment (4) from an order
// out of stock (6) from a confirmed one (0).
func TestOrderWaitExitsWithTheOrdersEnd(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Processing.SuccessRate = 0 // every payment declined
	s := testenv.NewStack(t, f, nil)
	bin := testenv.BuildBinary(t, "./starter")
	var env []string
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TASK_QUEUE", "DATABASE_URL", "GATEWAY_URL",
		"GATEWAY_SECRET", "CALLBACK_URL", codec.KeysEnv, deployment.NameEnv} {
		env = append(env, k+"="+s.Getenv(k))
	}
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("starter %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String() + stderr.String()
	}
	code, out := run("stock", "set", "P1", "2")
	require.Equal(t, exitcode.OK, code, out)

	code, out = run("order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", "exit-failed", "--wait")
	assert.Equal(t, exitcode.Failed, code, out)
	assert.Contains(t, out, "order exit-failed ended FAILED")

	code, out = run("order", "--product", "P1", "--qty", "5", "--amount", "5000", "--order-id", "exit-rejected", "--wait", "--json")
	assert.Equal(t, exitcode.Rejected, code, out)
	assert.Contains(t, out, `"kind":"rejected"`)

	testenv.PatchFaults(t, s.Sim, map[string]any{"processing": map[string]any{"successRate": 1}})
	code, out = run("order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", "exit-confirmed", "--wait")
	assert.Equal(t, exitcode.OK, code, out)
	assert.Contains(t, out, "CONFIRMED")
}
