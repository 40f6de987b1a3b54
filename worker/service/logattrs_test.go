package service_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/worker/service"
)

// The start line shows every duration as an operator writes it ("5s"),
// the create breaker's too, not slog's nanoseconds.
func TestTheStartLineShowsDurationsAsWritten(t *testing.T) {
	c, err := service.ParseFlags([]string{"--request-breaker-open", "5s"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("worker starting", c.LogAttrs()...)
	var line map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &line), b.String())
	rb, ok := line["request_breaker"].(map[string]any)
	require.True(t, ok, "request_breaker is a group: %s", b.String())
	assert.Equal(t, "5s", rb["open"])
	assert.Equal(t, "10s", rb["window"])
	assert.NotContains(t, b.String(), "5000000000", "no duration in nanoseconds")
}

// --log-level, from the flag or PAYGUARD_LOG_LEVEL, sets the least level.
func TestLogLevel(t *testing.T) {
	c, err := service.ParseFlags(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	c, err = service.ParseFlags([]string{"--log-level", "debug"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, slog.LevelDebug, c.LogLevel)
	c, err = service.ParseFlags(nil, func(k string) string { return map[string]string{"PAYGUARD_LOG_LEVEL": "warn"}[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, slog.LevelWarn, c.LogLevel)
	_, err = service.ParseFlags([]string{"--log-level", "loud"}, func(string) string { return "" }, io.Discard)
	assert.ErrorContains(t, err, "log-level")
}
