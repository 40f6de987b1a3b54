package simulator_test

import (
	"io"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/pgsim/simulator"
)

// On the command line a setting out of bounds is named by its flag, one
// pgsim really takes; in the admin API by its JSON field.
func TestFlagMessagesNameTheFlag(t *testing.T) {
	_, err := simulator.ParseFlags([]string{"--create-error-rate", "2"}, func(string) string { return "" }, io.Discard)
	require.Error(t, err)
	assert.Equal(t, exitcode.Usage, exitcode.Code(err))
	assert.Contains(t, err.Error(), "--create-error-rate must be within 0..1, got 2")
	assert.NotContains(t, err.Error(), "create.errorRate")

	// Every setting out of bounds at once: each name in the message is a flag.
	bad := simulator.DefaultFaults()
	bad.Latency = simulator.Range{Min: -1, Max: -2}
	for _, ep := range []*simulator.EndpointFaults{&bad.Create.EndpointFaults, &bad.Lookup, &bad.Cancel} {
		ep.ErrorRate, ep.TimeoutRate, ep.ErrorStatus, ep.FailNext, ep.TimeoutDelay = 2, math.NaN(), 200, -1, -1
	}
	bad.Create.CreatedThen500Rate = 2
	bad.Processing = simulator.Processing{Min: -1, Max: -2, SuccessRate: 2}
	bad.Callback = simulator.CallbackFaults{DropRate: 2, Delay: -1, DuplicateRate: 2}
	msg := bad.ValidateFlags().Error()
	fs := simulator.FlagSet(func(string) string { return "" })
	names := regexp.MustCompile(`--[a-z0-9-]+`).FindAllString(msg, -1)
	assert.Len(t, names, strings.Count(msg, "\n")+1+2, "one name a line, two in each min/max line: %s", msg)
	for _, n := range names {
		assert.NotNil(t, fs.Lookup(strings.TrimPrefix(n, "--")), "%s is not a pgsim flag", n)
	}
	assert.Contains(t, bad.Validate().Error(), "create.errorRate", "the admin API keeps its JSON names")
}
