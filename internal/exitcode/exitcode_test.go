package exitcode_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/status"
)

func TestCode(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for err, want := range map[error]int{
		nil:          exitcode.OK,
		flag.ErrHelp: exitcode.OK,
		fmt.Errorf("parse: %w", exitcode.ErrVersion):                          exitcode.OK,
		errors.New("boom"):                                                    exitcode.Error,
		exitcode.UsageError(errors.New("bad flag")):                           exitcode.Usage,
		fmt.Errorf("wrapped: %w", exitcode.UnavailableError(errors.New("x"))): exitcode.Unavailable,
		fmt.Errorf("connect: %w", dial):                                       exitcode.Unavailable,
		exitcode.Final("o-1", status.OrderFailed, "LIMIT_EXCEEDED"):           exitcode.Failed,
		exitcode.Final("o-1", status.OrderCancelled, ""):                      exitcode.Cancelled,
		exitcode.Final("o-1", status.OrderRejected, ""):                       exitcode.Rejected,
	} {
		assert.Equal(t, want, exitcode.Code(err), "%v", err)
	}
	assert.NoError(t, exitcode.Final("o-1", status.OrderConfirmed, ""))
	assert.Equal(t, exitcode.Error, exitcode.OfOrder(status.OrderPending), "not final")
	assert.Nil(t, exitcode.UsageError(nil))
}

// An error is one line on stderr, whatever breaks its message; under
// --json one JSON object; -h and --version print no error.
func TestReport(t *testing.T) {
	var out, errOut bytes.Buffer
	pgx := exitcode.UnavailableError(errors.New("failed to connect to `user=postgres`:\n\t127.0.0.1:1 (127.0.0.1): dial error: connection refused"))
	assert.Equal(t, exitcode.Unavailable, exitcode.Report(&out, &errOut, "starter", pgx))
	assert.Equal(t, "starter: failed to connect to `user=postgres`: 127.0.0.1:1 (127.0.0.1): dial error: connection refused\n", errOut.String())
	assert.Empty(t, out.String())

	errOut.Reset()
	assert.Equal(t, exitcode.Unavailable, exitcode.Report(&out, &errOut, "starter", exitcode.JSON(pgx, true)))
	require.Equal(t, 1, strings.Count(errOut.String(), "\n"), errOut.String())
	var obj map[string]any
	require.NoError(t, json.Unmarshal(errOut.Bytes(), &obj))
	assert.Equal(t, map[string]any{"error": "failed to connect to `user=postgres`: 127.0.0.1:1 (127.0.0.1): dial error: connection refused",
		"code": float64(3), "kind": "unavailable"}, obj)

	errOut.Reset()
	assert.Equal(t, exitcode.OK, exitcode.Report(&out, &errOut, "worker", flag.ErrHelp))
	assert.Equal(t, exitcode.OK, exitcode.Report(&out, &errOut, "worker", exitcode.ErrVersion))
	assert.Empty(t, errOut.String())
	assert.Regexp(t, `^worker \S+ \(\S+, go\S+\)\n$`, out.String())

	assert.Equal(t, exitcode.Error, exitcode.Report(&out, &errOut, "chaos", exitcode.Reported(errors.New("invariants violated"))))
	assert.Empty(t, errOut.String(), "told already")
}
