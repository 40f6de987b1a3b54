package payguard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
)

// `make codec-key` writes its ring where the programs look by default
// (codec.DevKeyFile), in the format they parse, readable by its owner only,
// and never replaces one.
func TestMakeCodecKeyMatchesTheGoDefinition(t *testing.T) {
	raw, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^CODEC_KEY_FILE \?= (\S+)$`).FindSubmatch(raw)
	require.NotNil(t, m)
	assert.Equal(t, codec.DevKeyFile, string(m[1]))

	path := filepath.Join(t.TempDir(), "d", "keys")
	out, err := exec.Command("make", "-s", "codec-key", "CODEC_KEY_FILE="+path).CombinedOutput()
	require.NoError(t, err, string(out))
	keys, err := codec.LoadKeys("", path)
	require.NoError(t, err)
	assert.Len(t, keys.IDs(), 1)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	first, _ := os.ReadFile(path)
	out, err = exec.Command("make", "-s", "codec-key", "CODEC_KEY_FILE="+path).CombinedOutput()
	require.NoError(t, err, string(out))
	again, _ := os.ReadFile(path)
	assert.Equal(t, first, again, "an existing ring is kept")
}
