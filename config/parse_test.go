package config_test

import (
	"bytes"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
)

func TestEnvName(t *testing.T) {
	assert.Equal(t, "PAYGUARD_HTTP_ADDR", config.EnvName("http-addr"))
	assert.Equal(t, "PAYGUARD_CREATE_CREATED_THEN_500_RATE", config.EnvName("create-created-then-500-rate"))
	assert.Equal(t, "PAYGUARD_JSON", config.EnvName("json"))
	assert.False(t, config.HasEnv(config.VersionFlag))
}

// The command line wins over PAYGUARD_<FLAG>, which wins over an older
// name read through the default, which wins over the code's default.
func TestParsePrecedence(t *testing.T) {
	parse := func(env map[string]string, args ...string) (string, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		getenv := func(k string) string { return env[k] }
		q := fs.String("task-queue", config.Env(getenv, "TASK_QUEUE", "payments"), "")
		err := config.Parse(fs, args, getenv)
		return *q, err
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "payments"},
		{map[string]string{"TASK_QUEUE": "old"}, nil, "old"},
		{map[string]string{"TASK_QUEUE": "old", "PAYGUARD_TASK_QUEUE": "rule"}, nil, "rule"},
		{map[string]string{"TASK_QUEUE": "old", "PAYGUARD_TASK_QUEUE": ""}, nil, "old"},
		{map[string]string{"PAYGUARD_TASK_QUEUE": "rule"}, []string{"--task-queue", "flag"}, "flag"},
	} {
		got, err := parse(c.env, c.args...)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%v %v", c.env, c.args)
	}
}

// A mistake prints the usage to the flag set's output and is a usage
// error (exit 2) that names what was wrong; -h prints it too and is no
// error; --version asks for the build.
func TestParseMistakesHelpAndVersion(t *testing.T) {
	newSet := func(out *bytes.Buffer) *flag.FlagSet {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(out)
		fs.Duration("poll-max", 0, "longest poll")
		return fs
	}
	none := func(string) string { return "" }
	for _, c := range []struct {
		args    []string
		env     map[string]string
		message string
	}{
		{[]string{"--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
		{[]string{"--poll-max", "soon"}, nil, `invalid value "soon" for flag -poll-max`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{nil, map[string]string{"PAYGUARD_POLL_MAX": "soon"}, `invalid value "soon" for PAYGUARD_POLL_MAX (--poll-max)`},
	} {
		var out bytes.Buffer
		err := config.Parse(newSet(&out), c.args, func(k string) string { return c.env[k] })
		require.Error(t, err, c.args)
		assert.Equal(t, exitcode.Usage, exitcode.Code(err), err.Error())
		assert.Contains(t, err.Error(), c.message)
		assert.Contains(t, out.String(), "-poll-max", "the usage is printed")
		assert.NotContains(t, out.String(), c.message, "the error is left to exitcode.Report's one line")
	}
	var out bytes.Buffer
	err := config.Parse(newSet(&out), []string{"-h"}, none)
	assert.ErrorIs(t, err, flag.ErrHelp)
	assert.Equal(t, exitcode.OK, exitcode.Code(err))
	assert.Contains(t, out.String(), "-poll-max")
	assert.Contains(t, out.String(), "PAYGUARD_", "the usage says the rule")
	assert.Contains(t, out.String(), "-version")

	err = config.Parse(newSet(&out), []string{"--version"}, none)
	assert.True(t, errors.Is(err, exitcode.ErrVersion))
}

// Flags stand before, between and after the positional arguments, and
// under --json a mistake prints no usage: stderr holds the JSON alone.
func TestParseArgs(t *testing.T) {
	var out bytes.Buffer
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&out)
	js := fs.Bool("json", false, "")
	n := fs.Int("n", 0, "")
	rest, err := config.ParseArgs(fs, []string{"a", "--n", "2", "b", "--json"}, func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, rest)
	assert.Equal(t, 2, *n)
	assert.True(t, *js)

	out.Reset()
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.Bool("json", false, "")
	_, err = config.ParseArgs(fs, []string{"--json", "--bad"}, func(string) string { return "" })
	assert.Equal(t, exitcode.Usage, exitcode.Code(err))
	assert.Empty(t, out.String())
}
