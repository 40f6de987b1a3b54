package httpapi_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/api/httpapi"
)

// The API refuses to listen beyond loopback without a token, and a token
// too short to be random, before it connects to anything.
func TestTheAPIRefusesToListenBeyondLoopbackWithoutAToken(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	_, err := httpapi.ParseFlags([]string{"--http-addr", "0.0.0.0:8080"}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), httpapi.TokenEnv)

	_, err = httpapi.ParseFlags([]string{"--http-addr", "0.0.0.0:8080"}, env(map[string]string{httpapi.TokenEnv: "short"}), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at least")

	cfg, err := httpapi.ParseFlags([]string{"--http-addr", "0.0.0.0:8080"}, env(map[string]string{httpapi.TokenEnv: strings.Repeat("a1", 16)}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("a1", 16), cfg.Token)

	cfg, err = httpapi.ParseFlags(nil, env(nil), io.Discard)
	require.NoError(t, err, "loopback without a token")
	assert.Equal(t, httpapi.DefaultAddr, cfg.HTTPAddr)

	_, err = httpapi.ParseFlags([]string{"extra"}, env(nil), io.Discard)
	assert.ErrorContains(t, err, "unexpected argument")
}
