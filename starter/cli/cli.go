// Package cli is the starter: the command line a user drives payguard with
// (docs/design.md §8). Every command prints text, or JSON with --json, and fails with
// one clear line.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/telemetry"
)

// Env is what a command may use of the outside world.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
	// describe, when set, is handed the command's flag set in place of
	// parsing it, and the command stops there (CommandFlags).
	describe func(*flag.FlagSet)
	// json is the command's --json, which Run reads to report an error
	// as JSON (nil: the command's own).
	json *bool
}

const usage = `usage: starter <command> [flags]

commands:
  order --product P --qty N --amount A [--order-id ID] [--user U] [--card-type T] [--card-no NO] [--deadline 10m] [--wait]
  status ORDER_ID
  cancel ORDER_ID
  refund ORDER_ID
  stock set PRODUCT QTY | stock show PRODUCT
  callback ORDER_ID --status SUCCESS|FAILED [--reason R]
  load --rate R --duration D [--products P1,P2]
  reconcile [--since 24h] [--dry-run]
  deployment set-current --build-id B | deployment describe | deployment wait-drained --build-id A [--timeout 25h]

every command takes --json (an error then is one JSON object on stderr) and -h; --version prints
the build. Exit codes: 0 done (an awaited order CONFIRMED), 1 error, 2 usage, 3 Temporal or
PostgreSQL unreachable, 4 FAILED, 5 CANCELLED, 6 REJECTED. Every flag also reads PAYGUARD_<FLAG>
(--task-queue: PAYGUARD_TASK_QUEUE); connection settings come from TEMPORAL_ADDRESS (or a Temporal client
config profile: TEMPORAL_PROFILE), DATABASE_URL, GATEWAY_URL, GATEWAY_SECRET, CALLBACK_URL, the
payload codec key ring from PAYGUARD_CODEC_KEYS or PAYGUARD_CODEC_KEY_FILE, the Worker Deployment's
name from PAYGUARD_DEPLOYMENT_NAME, or the matching flags (-h on a command lists them).`

// Run runs one command. Its error carries its exit code (exitcode.Code)
// and, under --json, asks to be reported as JSON.
func Run(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, usage)
		return exitcode.UsageError(errors.New("no command given"))
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help": // asked for as a command: the answer, on stdout
		fmt.Fprintln(env.Stdout, usage)
		return nil
	case "-h", "--help": // as every binary's -h: on stderr
		fmt.Fprintln(env.Stderr, usage)
		return nil
	case "version", "-version", "--version":
		return exitcode.ErrVersion
	}
	stopTracing, err := telemetry.Setup(ctx, "payguard-starter", env.Getenv)
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	if env.json == nil {
		env.json = new(bool)
	}
	var names []string
	for _, c := range commands {
		if c.name == cmd {
			return exitcode.JSON(c.run(ctx, rest, env), *env.json)
		}
		names = append(names, c.name)
	}
	fmt.Fprintln(env.Stderr, usage)
	return exitcode.UsageError(fmt.Errorf("unknown command %q (commands: %s)", cmd, strings.Join(names, ", ")))
}

// commands are the starter's commands, as Run dispatches them.
var commands = []struct {
	name string
	// subcommands are the values of the first argument of a command that
	// takes one, each its own command line (CommandFlags).
	subcommands []string
	run         func(ctx context.Context, args []string, env Env) error
}{
	{name: "order", run: runOrder},
	{name: "status", run: runStatus},
	{name: "cancel", run: runCancel},
	{name: "refund", run: runRefund},
	{name: "stock", subcommands: []string{"set", "show"}, run: runStock},
	{name: "callback", run: runCallback},
	{name: "load", run: runLoad},
	{name: "reconcile", run: runReconcile},
	{name: "deployment", subcommands: []string{"set-current", "describe", "wait-drained"}, run: runDeployment},
}

// Commands names every command line the starter takes, a command with
// subcommands once for each ("stock set").
func Commands() []string {
	var out []string
	for _, c := range commands {
		if len(c.subcommands) == 0 {
			out = append(out, c.name)
		}
		for _, sub := range c.subcommands {
			out = append(out, c.name+" "+sub)
		}
	}
	return out
}

// errDescribed stops a command that handed its flags to Env.describe.
var errDescribed = errors.New("flags described, command not run")

// CommandFlags is the flag set of a command line Commands names, unparsed
// (docs/configuration.md is generated from it). The command runs as far
// as its parsing, which comes before anything it does.
func CommandFlags(name string, getenv func(string) string) (*flag.FlagSet, error) {
	words := strings.Fields(name)
	if len(words) == 0 {
		return nil, errors.New("no command given")
	}
	var fs *flag.FlagSet
	env := Env{Getenv: getenv, Stdout: io.Discard, Stderr: io.Discard, describe: func(f *flag.FlagSet) { fs = f }}
	for _, c := range commands {
		if c.name != words[0] {
			continue
		}
		if err := c.run(context.Background(), words[1:], env); !errors.Is(err, errDescribed) {
			return nil, fmt.Errorf("starter %s did not reach its flags: %v", name, err)
		}
		return fs, nil
	}
	return nil, fmt.Errorf("unknown command %q", name)
}

// command is one parsed command line.
type command struct {
	name   string
	fs     *flag.FlagSet
	common config.Common
	json   *bool
	env    Env
	args   []string
}

func newCommand(name string, env Env) *command {
	c := &command{name: name, fs: flag.NewFlagSet("starter "+name, flag.ContinueOnError), env: env, json: env.json}
	if c.json == nil {
		c.json = new(bool)
	}
	c.fs.SetOutput(env.Stderr)
	c.common.Register(c.fs, env.Getenv)
	c.fs.BoolVar(c.json, "json", false, "machine-readable output; an error is one JSON object {error, code, kind} on stderr")
	return c
}

// parse accepts flags before, between and after positional arguments,
// each flag from its variable where the command line leaves it
// (config.ParseArgs). A mistake is a usage error.
func (c *command) parse(args []string, positional int) error {
	if c.env.describe != nil {
		c.env.describe(c.fs)
		return errDescribed
	}
	rest, err := config.ParseArgs(c.fs, args, c.env.Getenv)
	if err != nil {
		if exitcode.Code(err) == exitcode.Usage {
			return exitcode.UsageError(fmt.Errorf("%s: %w", c.name, err))
		}
		return err
	}
	c.args = rest
	if len(c.args) != positional {
		return exitcode.UsageError(fmt.Errorf("%s: want %d argument(s), got %d (%s)", c.name, positional, len(c.args), strings.Join(c.args, " ")))
	}
	return nil
}

func (c *command) print(v any, text string) error {
	if *c.json {
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(c.env.Stdout, text)
	return err
}

// dialTemporal connects once, with a short timeout and a clear error.
func (c *command) dialTemporal(ctx context.Context) (client.Client, error) {
	opts, err := c.common.ClientOptions(discardLogger())
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	opts.Interceptors = telemetry.Interceptors()
	cl, err := client.DialContext(dialCtx, opts)
	if err != nil {
		return nil, exitcode.UnavailableError(fmt.Errorf("temporal unreachable at %s (is the dev server running? `make dev-server`): %v", opts.HostPort, loadgen.RootCause(err)))
	}
	return cl, nil
}

// openStore connects to Postgres with a clear error.
func (c *command) openStore(ctx context.Context) (*store.Store, error) {
	openCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := store.Open(openCtx, c.common.DatabaseURL)
	if err != nil {
		return nil, exitcode.UnavailableError(fmt.Errorf("postgres unreachable at %s: %v", config.MaskURL(c.common.DatabaseURL), exitcode.OneLine(loadgen.RootCause(err).Error())))
	}
	return st, nil
}
