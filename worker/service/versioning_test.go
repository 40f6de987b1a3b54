package service_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/worker/service"
)

func TestWorkerVersioningFlags(t *testing.T) {
	none := func(string) string { return "" }
	c, err := service.ParseFlags(nil, none, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, deployment.DefaultName, c.DeploymentName)
	assert.Empty(t, c.BuildID, "the binary's own, which the log shows")
	assert.Equal(t, deployment.SetCurrentAuto, c.SetCurrent)
	attrs := c.LogAttrs()
	for _, want := range []any{"deployment_name", deployment.DefaultName, "build_id", deployment.DefaultBuildID(), "set_current", "auto"} {
		assert.Contains(t, attrs, want, "the start log shows the version")
	}

	env := map[string]string{deployment.NameEnv: "shop", deployment.BuildIDEnv: "v7", deployment.SetCurrentEnv: "never"}
	c, err = service.ParseFlags(nil, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "shop", c.DeploymentName)
	assert.Equal(t, "v7", c.BuildID)
	assert.Equal(t, deployment.SetCurrentNever, c.SetCurrent)
	c, err = service.ParseFlags([]string{"--set-current", "always"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, deployment.SetCurrentAlways, c.SetCurrent, "the flag wins over the environment")

	for want, args := range map[string][]string{
		"--deployment-name":         {"--deployment-name", "pay.guard"},
		"--build-id":                {"--build-id", "v1:2"},
		"auto, always or never":     {"--set-current", "sometimes"},
		"must be 1-128 characters ": {"--build-id", "__v1"},
	} {
		_, err := service.ParseFlags(args, none, io.Discard)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), want, "%v", args)
	}
	_, err = service.ParseFlags(nil, func(k string) string { return map[string]string{deployment.BuildIDEnv: "v 1"}[k] }, io.Discard)
	assert.ErrorContains(t, err, "--build-id", "the environment's value is checked too")
}
