package config_test

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
)

// Client options: the config profile, the environment over it, the flags
// over both, payguard's defaults under all; and the codec always on.
func TestClientOptionsPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte("[profile.p]\naddress = \"profile:7233\"\nnamespace = \"profile-ns\"\napi_key = \"k\"\n"), 0o600))
	options := func(env map[string]string, args ...string) (string, string, bool) {
		t.Helper()
		env[codec.KeysEnv] = codec.NewKey("t")
		var c config.Common
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		c.Register(fs, func(k string) string { return env[k] })
		require.NoError(t, fs.Parse(args))
		opts, err := c.ClientOptions(slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		require.NotNil(t, opts.DataConverter, "the payload codec is always on")
		require.IsType(t, &client.GrpcCompressionNone{}, opts.ConnectionOptions.GrpcCompression, "ciphertext is not gzipped")
		return opts.HostPort, opts.Namespace, opts.ConnectionOptions.TLS != nil
	}
	none := filepath.Join(t.TempDir(), "none.toml") // so the user's own file is not read
	addr, ns, tls := options(map[string]string{"TEMPORAL_CONFIG_FILE": none})
	assert.Equal(t, [3]any{config.DefaultTemporalAddress, config.DefaultNamespace, false}, [3]any{addr, ns, tls})

	profile := map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "p"}
	addr, ns, tls = options(profile)
	assert.Equal(t, [3]any{"profile:7233", "profile-ns", true}, [3]any{addr, ns, tls}, "an API key turns TLS on")

	profile["TEMPORAL_ADDRESS"], profile["TEMPORAL_NAMESPACE"] = "env:7233", "env-ns"
	addr, ns, _ = options(profile)
	assert.Equal(t, [2]string{"env:7233", "env-ns"}, [2]string{addr, ns}, "the environment over the profile")

	addr, ns, _ = options(profile, "--temporal-address", "flag:7233", "--temporal-namespace", "flag-ns")
	assert.Equal(t, [2]string{"flag:7233", "flag-ns"}, [2]string{addr, ns}, "the flags over both")

	var c config.Common
	c.Register(flag.NewFlagSet("x", flag.ContinueOnError), func(k string) string {
		return map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "missing", codec.KeysEnv: codec.NewKey("t")}[k]
	})
	_, err := c.ClientOptions(slog.New(slog.DiscardHandler))
	assert.ErrorContains(t, err, "TEMPORAL_PROFILE", "a named profile that is not there is an error")
}
