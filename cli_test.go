package payguard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/testenv"
)

// otherMains are the programs beside the top-level directories with a
// main.go, by the name each reports itself with.
var otherMains = map[string]string{"internal/temporalserver/serve": "temporal-server"}

// binaries builds every payguard program (each top-level directory with
// a main.go, and otherMains) into one directory, in one go build; names
// maps each binary's file to the name it reports itself with.
func binaries(t *testing.T) (dir string, names map[string]string) {
	t.Helper()
	testenv.NeedsServices(t, "a build of every binary")
	mains, err := filepath.Glob("*/main.go")
	require.NoError(t, err)
	dir = t.TempDir()
	args := []string{"build", "-o", dir + "/"}
	names = map[string]string{}
	for _, m := range mains {
		names[filepath.Dir(m)] = filepath.Dir(m)
		args = append(args, "./"+filepath.Dir(m))
	}
	for pkg, name := range otherMains {
		names[filepath.Base(pkg)] = name
		args = append(args, "./"+pkg)
	}
	require.GreaterOrEqual(t, len(names), 8)
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir, names
}

// The binaries as an operator runs them, built once.
func TestBinaries(t *testing.T) {
	dir, names := binaries(t)
	t.Run("conventions", func(t *testing.T) { everyBinaryFollowsTheConventions(t, dir, names) })
	t.Run("unreachable", func(t *testing.T) { starterErrorsWithServicesUnreachable(t, dir) })
	t.Run("environment", func(t *testing.T) { environmentRuleInTheBinaries(t, dir) })
}

type ran struct {
	code           int
	stdout, stderr string
}

// run runs a built binary with only env as its environment (and a HOME
// of its own: no Temporal client profile of the user's).
func run(t *testing.T, bin string, env []string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", bin, err)
	}
	return ran{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// lastLine is what a script reads of stderr: its last line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Every binary: a bad flag exits 2 with the usage and a one-line error
// on stderr, nothing on stdout; -h exits 0 with the usage on stderr;
// --version exits 0 with the build on stdout.
func everyBinaryFollowsTheConventions(t *testing.T, dir string, names map[string]string) {
	for file, name := range names {
		bin := filepath.Join(dir, file)
		args := []string{"--no-such-flag"}
		if name == "starter" {
			args = []string{"status", "--no-such-flag"}
		}
		r := run(t, bin, nil, args...)
		assert.Equal(t, exitcode.Usage, r.code, "%s %v: %+v", name, args, r)
		assert.Empty(t, r.stdout, name)
		assert.Contains(t, r.stderr, "usage of", name)
		assert.Contains(t, r.stderr, "PAYGUARD_", "%s: the usage says the environment rule", name)
		assert.Regexp(t, `^`+name+`: .*flag provided but not defined: -no-such-flag$`, lastLine(r.stderr), name)

		r = run(t, bin, nil, "-h")
		assert.Equal(t, exitcode.OK, r.code, "%s -h: %+v", name, r)
		assert.Empty(t, r.stdout, name)
		assert.Contains(t, r.stderr, "-version", name)

		r = run(t, bin, nil, "--version")
		assert.Equal(t, exitcode.OK, r.code, "%s --version: %+v", name, r)
		assert.Regexp(t, `^`+name+` \S+ \(\S+, go[0-9.]+\S*\)\n$`, r.stdout, name)
		assert.Empty(t, r.stderr, name)
	}
	starter := filepath.Join(dir, "starter")
	for _, args := range [][]string{nil, {"no-such-command"}, {"status"}, {"order", "--amount", "-5", "--product", "P1"}} {
		r := run(t, starter, nil, args...)
		assert.Equal(t, exitcode.Usage, r.code, "starter %v: %+v", args, r)
	}
}

// With PostgreSQL and Temporal unreachable a starter command exits 3
// and says so in one line, or in one JSON object under --json.
func starterErrorsWithServicesUnreachable(t *testing.T, dir string) {
	starter := filepath.Join(dir, "starter")
	closed := testenv.FreeAddr(t) // nothing listens there
	env := []string{"DATABASE_URL=postgres://postgres@" + closed + "/payguard?sslmode=disable&connect_timeout=2",
		"TEMPORAL_ADDRESS=" + closed, codec.KeysEnv + "=" + testenv.CodecKeys()}
	for _, args := range [][]string{{"status", "o-1"}, {"stock", "show", "P1"}, {"order", "--product", "P1", "--amount", "5"}} {
		r := run(t, starter, env, args...)
		assert.Equal(t, exitcode.Unavailable, r.code, "%v: %+v", args, r)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		assert.True(t, strings.HasPrefix(r.stderr, "starter: "), r.stderr)

		r = run(t, starter, env, append(args, "--json")...)
		assert.Equal(t, exitcode.Unavailable, r.code, "%v --json: %+v", args, r)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		var obj struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
			Kind  string `json:"kind"`
		}
		dec := json.NewDecoder(strings.NewReader(r.stderr))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&obj), r.stderr)
		assert.Equal(t, exitcode.Unavailable, obj.Code)
		assert.Equal(t, "unavailable", obj.Kind)
		assert.NotEmpty(t, obj.Error)
		assert.Empty(t, r.stdout)
	}
	// A usage mistake under --json is JSON too, without the usage.
	r := run(t, starter, env, "status", "--json", "--no-such-flag")
	assert.Equal(t, exitcode.Usage, r.code)
	assert.True(t, json.Valid([]byte(r.stderr)), r.stderr)
	assert.Contains(t, r.stderr, `"kind":"usage"`)
}

// Every flag reads PAYGUARD_<FLAG>, over the older name: pgsim listens
// where PAYGUARD_ADDR says, logs at PAYGUARD_LOG_LEVEL, names a bad
// variable, and a SIGTERM ends it with 0.
func environmentRuleInTheBinaries(t *testing.T, dir string) {
	pgsim := filepath.Join(dir, "pgsim")
	r := run(t, pgsim, []string{"PAYGUARD_CREATE_ERROR_RATE=2"})
	assert.Equal(t, exitcode.Usage, r.code, "%+v", r)
	assert.Contains(t, lastLine(r.stderr), "--create-error-rate must be within 0..1, got 2")
	r = run(t, pgsim, []string{"PAYGUARD_CREATE_ERROR_RATE=lots"})
	assert.Equal(t, exitcode.Usage, r.code, "%+v", r)
	assert.Contains(t, lastLine(r.stderr), `invalid value "lots" for PAYGUARD_CREATE_ERROR_RATE (--create-error-rate)`)

	for _, level := range []string{"info", "warn"} {
		addr, admin := testenv.FreeAddr(t), testenv.FreeAddr(t)
		cmd := exec.Command(pgsim)
		cmd.Env = []string{"PAYGUARD_ADDR=" + addr, "PAYGUARD_ADMIN_ADDR=" + admin, "PAYGUARD_LOG_LEVEL=" + level}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		testenv.Eventually(t, 10*time.Second, func() bool {
			resp, err := http.Get("http://" + admin + "/admin/faults")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		}, "pgsim's admin API on PAYGUARD_ADMIN_ADDR")
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait(), "a SIGTERM ends it with 0: %s", stderr.String())
		if level == "info" {
			assert.Contains(t, stdout.String(), `"msg":"pgsim listening"`)
			assert.Contains(t, stdout.String(), addr, "the gateway on PAYGUARD_ADDR")
		} else {
			assert.NotContains(t, stdout.String(), `"level":"INFO"`, "PAYGUARD_LOG_LEVEL=warn: %s", stdout.String())
		}
	}

	// The starter: PAYGUARD_DATABASE_URL wins over DATABASE_URL.
	starter := filepath.Join(dir, "starter")
	db := testenv.NewDatabase(t)
	closed := testenv.FreeAddr(t)
	r = run(t, starter, []string{"DATABASE_URL=" + db}, "stock", "set", "P1", "3")
	require.Equal(t, exitcode.OK, r.code, "%+v", r)
	r = run(t, starter, []string{"DATABASE_URL=" + db, "PAYGUARD_DATABASE_URL=postgres://postgres@" + closed + "/x?connect_timeout=2"}, "stock", "show", "P1")
	assert.Equal(t, exitcode.Unavailable, r.code, "%+v", r)
	assert.Contains(t, r.stderr, closed)
}
