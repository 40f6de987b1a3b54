package cli_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
)

// The starter refuses bad input with one clear line, never echoing a card
// number, before it starts anything.
func TestStarterRejectsBadInputBeforeStarting(t *testing.T) {
	t.Parallel()
	keysOnly := func(k string) string {
		if k == codec.KeysEnv {
			return testenv.CodecKeys()
		}
		return ""
	}
	env := cli.Env{Getenv: keysOnly, Stdout: io.Discard, Stderr: io.Discard}
	cases := map[string][]string{
		"got 20 characters ending ****1451":       {"order", "--product", "P1", "--amount", "5", "--card-no", "12345-5678-9814-1451"},
		"--qty must be at least 1":                {"order", "--product", "P1", "--qty", "-1", "--amount", "5"},
		"--amount must be positive":               {"order", "--product", "P1", "--qty", "1", "--amount", "0"},
		"--card-no must look like":                {"order", "--product", "P1", "--amount", "5", "--card-no", "1234"},
		"--card-type must be one of":              {"order", "--product", "P1", "--amount", "5", "--card-type", "VISA"},
		"--product is required":                   {"order", "--amount", "5"},
		"--deadline must be positive and at most": {"order", "--product", "P1", "--amount", "5", "--deadline", "48h"},
		"unknown command":                         {"pay"},
		"--status must be SUCCESS or FAILED":      {"callback", "o1", "--status", "MAYBE"},
		"QTY must be a whole number":              {"stock", "set", "P1", "many"},
		"want 1 argument(s)":                      {"status"},
		"--rate must be positive":                 {"load", "--rate", "0", "--duration", "1s"},
		"--amount must be positive (minor units)": {"load", "--rate", "1", "--duration", "1s", "--amount", "-5"},
		"temporal unreachable at 127.0.0.1:1":     {"order", "--product", "P1", "--amount", "5", "--temporal-address", "127.0.0.1:1"},
		"invalid value \"x\" for flag -qty":       {"order", "--product", "P1", "--qty", "x"},
		"postgres unreachable at postgres://nobo": {"stock", "show", "P1", "--database-url", "postgres://nobody@127.0.0.1:1/x"},
	}
	for want, args := range cases {
		err := cli.Run(context.Background(), args, env)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), want, "%v", args)
		assert.NotContains(t, err.Error(), "\n\n", "one clear line")
		assert.NotContains(t, err.Error(), "5678", "a card number is never echoed")
	}
	// No key ring: refused before dialling, saying how to provide one.
	err := cli.Run(context.Background(), []string{"order", "--product", "P1", "--amount", "5", "--codec-key-file", filepath.Join(t.TempDir(), "none")},
		cli.Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no payload codec key")
	assert.Contains(t, err.Error(), codec.KeysEnv)
}
