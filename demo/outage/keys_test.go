package outage

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
)

// The demo's first run generates the development key ring, and later runs
// keep it (payloads written with it stay readable); a ring from the
// environment is used as given.
func TestDemoGeneratesTheDevelopmentKeyOnce(t *testing.T) {
	t.Chdir(t.TempDir())
	var said []string
	say := func(f string, a ...any) { said = append(said, f) }
	none := func(string) string { return "" }
	c, err := codecKeys(none, say)
	require.NoError(t, err)
	assert.Equal(t, codec.DevKeyFile, c.CodecKeyFile)
	first, err := os.ReadFile(codec.DevKeyFile)
	require.NoError(t, err)
	assert.Len(t, said, 1, "it says it generated one")
	_, err = codecKeys(none, say)
	require.NoError(t, err)
	again, err := os.ReadFile(codec.DevKeyFile)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Len(t, said, 1)

	ring := codec.NewKey("prod-1")
	c, err = codecKeys(func(k string) string { return map[string]string{codec.KeysEnv: ring}[k] }, say)
	require.NoError(t, err)
	assert.Equal(t, ring, c.CodecKeys)
}
