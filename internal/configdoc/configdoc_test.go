package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/starter/cli"
)

const docFile = "../../docs/configuration.md"

// The checked-in table is the one the flag sets make: a flag added,
// renamed or re-defaulted without `make config-doc` fails here.
func TestConfigurationDocIsCurrent(t *testing.T) {
	doc, err := generate()
	require.NoError(t, err)
	require.NoError(t, checkCurrent(docFile, doc))
}

func TestAStaleDocSaysWhereItDiffersAndHowToRegenerate(t *testing.T) {
	doc, err := generate()
	require.NoError(t, err)
	stale := filepath.Join(t.TempDir(), "configuration.md")
	require.NoError(t, os.WriteFile(stale, []byte(strings.Replace(string(doc), "`payments`", "`orders`", 1)), 0o644))
	err = checkCurrent(stale, doc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make config-doc")
	assert.Contains(t, err.Error(), "`orders`", "the file's line")
	assert.Contains(t, err.Error(), "`payments`", "the flag sets' line")

	require.NoError(t, os.WriteFile(stale, doc[:len(doc)/2], 0o644))
	assert.ErrorContains(t, checkCurrent(stale, doc), "make config-doc", "a truncated file")
	assert.ErrorContains(t, checkCurrent(filepath.Join(t.TempDir(), "missing.md"), doc), "make config-doc", "no file")
}

// Every directory with a main.go is a payguard program, and has its section.
func TestEveryProgramIsInTheTable(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	require.NoError(t, err)
	require.NotEmpty(t, mains)
	var documented []string
	for _, p := range programs() {
		documented = append(documented, p.name)
	}
	for _, m := range mains {
		assert.Contains(t, documented, filepath.Base(filepath.Dir(m)), "a program with no section in docs/configuration.md: add it to programs()")
	}
}

// Each starter command line gives up its flag set without running: the
// shared flags, --json, and its own.
func TestEveryStarterCommandGivesItsFlags(t *testing.T) {
	names := cli.Commands()
	assert.Contains(t, names, "order")
	assert.Contains(t, names, "stock set")
	assert.NotContains(t, names, "stock", "a command with subcommands is listed by them")
	for _, name := range names {
		// Addresses nothing listens on: a command that ran past its
		// parsing would fail to reach them.
		fs, err := cli.CommandFlags(name, func(k string) string {
			return map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1", "DATABASE_URL": "postgres://nobody@127.0.0.1:1/x?connect_timeout=1"}[k]
		})
		require.NoError(t, err, name)
		assert.NotNil(t, fs.Lookup("json"), name)
		assert.NotNil(t, fs.Lookup("task-queue"), name)
	}
	fs, err := cli.CommandFlags("order", noEnv)
	require.NoError(t, err)
	assert.NotNil(t, fs.Lookup("amount"))
	_, err = cli.CommandFlags("refund-everything", noEnv)
	assert.ErrorContains(t, err, "unknown command")
	_, err = cli.CommandFlags("stock", noEnv)
	assert.ErrorContains(t, err, "did not reach its flags")
}

func TestTheEnvironmentColumnIsWhatEachFlagReads(t *testing.T) {
	d, err := describe("t", func(getenv func(string) string) (*flag.FlagSet, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("queue", config.Env(getenv, "T_QUEUE", "q"), "")
		fs.String("one", config.Env(getenv, "T_ONE", "1"), "a default that is a probe value already")
		fs.Bool("exit", getenv("T_EXIT") == "1", "")
		fs.Int("plain", 3, "")
		_ = getenv("T_ONLY") // read for no flag
		return fs, nil
	})
	require.NoError(t, err)
	byName := map[string]row{}
	for _, r := range d.rows {
		byName[r.name] = r
	}
	assert.Equal(t, "PAYGUARD_QUEUE, T_QUEUE", byName["queue"].env, "the rule's name first, then the older one")
	assert.Equal(t, "q", byName["queue"].def)
	assert.Equal(t, "PAYGUARD_ONE, T_ONE", byName["one"].env)
	assert.Equal(t, "PAYGUARD_EXIT, T_EXIT", byName["exit"].env)
	assert.Equal(t, "PAYGUARD_PLAIN", byName["plain"].env, "every flag has the rule's variable")
	assert.Equal(t, []string{"T_ONLY"}, d.envOnly)

	// The real sets: a shared flag, a worker one, the demo's bool.
	common, err := describe("shared", shared)
	require.NoError(t, err)
	assert.Contains(t, common.rows, row{name: "task-queue", env: "PAYGUARD_TASK_QUEUE, TASK_QUEUE", def: config.DefaultTaskQueue, usage: "task queue (env TASK_QUEUE)"})
	assert.Contains(t, common.envOnly, codec.KeysEnv)
	for _, c := range []struct{ set, flag, env string }{{"worker", "codec-token", "PAYGUARD_CODEC_TOKEN"}, {"demo", "exit", "PAYGUARD_EXIT, DEMO_EXIT"}, {"worker", "http-addr", "PAYGUARD_HTTP_ADDR"}} {
		d, err := describe(c.set, lineOf(t, c.set).build)
		require.NoError(t, err)
		assert.Contains(t, envs(d), c.flag+"="+c.env)
	}
}

func lineOf(t *testing.T, title string) commandLine {
	for _, p := range programs() {
		for _, l := range p.lines {
			if l.title == title {
				return l
			}
		}
	}
	t.Fatalf("no command line %q", title)
	return commandLine{}
}

func envs(d described) []string {
	var out []string
	for _, r := range d.rows {
		out = append(out, r.name+"="+r.env)
	}
	return out
}

// A default from the clock cannot be shown; it is marked, and no
// variable is pinned on it for changing between builds.
func TestADefaultNewEachRunIsMarked(t *testing.T) {
	n := 0
	d, err := describe("t", func(getenv func(string) string) (*flag.FlagSet, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n++
		fs.Int("seed", n, "")
		_ = getenv("T_OTHER")
		return fs, nil
	})
	require.NoError(t, err)
	require.Len(t, d.rows, 1)
	assert.True(t, d.rows[0].varies)
	assert.Equal(t, "PAYGUARD_SEED", d.rows[0].env, "only the rule's: a default that varies pins no older name")
	assert.Equal(t, "new each run", defaultCell(d.rows[0]))
}

// The table is the code's, whatever the environment it is generated in.
func TestTheTableIgnoresTheGeneratingEnvironment(t *testing.T) {
	plain, err := generate()
	require.NoError(t, err)
	t.Setenv("TASK_QUEUE", "elsewhere")
	t.Setenv("DEMO_EXIT", "1")
	t.Setenv("GATEWAY_SECRET", "a-real-secret")
	again, err := generate()
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(again))
	assert.NotContains(t, string(again), "a-real-secret")
}

func TestASecretsDefaultIsMasked(t *testing.T) {
	doc, err := generate()
	require.NoError(t, err)
	assert.NotContains(t, string(doc), gateway.DevSecret)
	assert.Contains(t, string(doc), "| `--gateway-secret` | `PAYGUARD_GATEWAY_SECRET`, `GATEWAY_SECRET` | (development default) |")
}
