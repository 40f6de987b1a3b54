package temporalserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/temporalserver"
)

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := devserver.ModuleRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return string(raw)
}

// ops/temporal/postgres.yaml reads exactly the environment Settings.Env
// hands it, each with the default the Go code owns: a server started by
// hand (make temporal-server, compose) and one started from Go agree.
func TestConfigReadsTheSettingsWithTheGoDefaults(t *testing.T) {
	cfg := repoFile(t, filepath.Join(temporalserver.ConfigDir, temporalserver.ConfigEnv+".yaml"))
	require.Regexp(t, `(?m)^# enable-template$`, cfg, "the server renders the file only with this comment in its first 1 KB")
	read := map[string]string{}
	for _, m := range regexp.MustCompile(`env "([A-Z_]+)"(?: \| default "([^"]*)")?`).FindAllStringSubmatch(cfg, -1) {
		read[m[1]] = m[2]
	}
	want := map[string]string{
		temporalserver.PortBaseEnv: strconv.Itoa(temporalserver.DefaultPortBase), temporalserver.BindIPEnv: temporalserver.DefaultBindIP,
		temporalserver.SQLAddrEnv: temporalserver.DefaultSQLAddr, temporalserver.SQLUserEnv: temporalserver.DefaultSQLUser,
		temporalserver.SQLPasswordEnv: "", temporalserver.DBEnv: temporalserver.DefaultDB,
		temporalserver.VisibilityDBEnv:  temporalserver.DefaultVisibilityDB,
		temporalserver.DynamicConfigEnv: temporalserver.ConfigDir + "/" + temporalserver.DynamicConfigFile,
		temporalserver.LogLevelEnv:      temporalserver.DefaultLogLevel,
	}
	assert.Equal(t, want, read)
	var names []string
	for _, kv := range (temporalserver.Settings{}).Env() {
		names = append(names, regexp.MustCompile(`=.*`).ReplaceAllString(kv, ""))
	}
	assert.ElementsMatch(t, keysOf(want), names, "Settings.Env sets what the config reads")

	// The ports the template gives, from the base on, are Ports of them.
	offsets := map[int]bool{0: true}
	for _, m := range regexp.MustCompile(`add \$base (\d+)`).FindAllStringSubmatch(cfg, -1) {
		n, _ := strconv.Atoi(m[1])
		assert.False(t, offsets[n], "port base+%d given twice", n)
		offsets[n] = true
	}
	assert.Len(t, offsets, temporalserver.Ports)
	for n := range offsets {
		assert.Less(t, n, temporalserver.Ports)
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The dynamic config is YAML the server's file client reads, a list of
// values per key, and tunes the server as devserver.TuningArgs tune the
// dev server: both Temporals are measured alike.
func TestDynamicConfigHasTheDevServersTuning(t *testing.T) {
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(repoFile(t, filepath.Join(temporalserver.ConfigDir, temporalserver.DynamicConfigFile))), &dc))
	tuning, err := temporalserver.DynamicConfigArgs(devserver.TuningArgs)
	require.NoError(t, err)
	require.NotEmpty(t, tuning)
	for k, v := range tuning {
		require.Len(t, dc[k], 1, "%s set once in %s", k, temporalserver.DynamicConfigFile)
		assert.Equal(t, v, fmt.Sprint(dc[k][0].Value), k)
	}
}

// The Makefile builds the release this package names.
func TestMakefileBuildsTheVersion(t *testing.T) {
	m := regexp.MustCompile(`(?m)^TEMPORAL_SERVER_VERSION\s*:=\s*(\S+)$`).FindStringSubmatch(repoFile(t, "Makefile"))
	require.NotNil(t, m, "TEMPORAL_SERVER_VERSION in the Makefile")
	assert.Equal(t, temporalserver.Version, m[1])
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]temporalserver.Kind{"": temporalserver.KindDev, "dev": temporalserver.KindDev, "server": temporalserver.KindServer} {
		got, err := temporalserver.ParseKind(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := temporalserver.ParseKind("cloud")
	assert.Error(t, err)
	// A report on the real server does not call it the dev server.
	assert.Equal(t, "Temporal server", temporalserver.KindServer.Server())
	assert.Equal(t, "dev server", temporalserver.Kind("").Server())
}

func TestDynamicConfigArgs(t *testing.T) {
	got, err := temporalserver.DynamicConfigArgs([]string{"--dynamic-config-value", "a.b=1", "--dynamic-config-value", "c=true"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a.b": "1", "c": "true"}, got)
	_, err = temporalserver.DynamicConfigArgs([]string{"--sqlite-pragma", "x=y"})
	assert.Error(t, err, "a dev-server-only flag is refused, not dropped")
}
