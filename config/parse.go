package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/payguard/payguard/internal/exitcode"
)

// EnvPrefix starts the variable of every flag (EnvName).
const EnvPrefix = "PAYGUARD_"

// VersionFlag is the flag every program takes to print its build; like
// -h it has no variable.
const VersionFlag = "version"

// EnvName is the one rule that gives every flag its environment variable:
// PAYGUARD_ and the flag's name upper-cased, '-' as '_'
// (--http-addr: PAYGUARD_HTTP_ADDR). The names a flag read before the rule
// (TASK_QUEUE, DATABASE_URL, …) still set its default; the rule's wins over them.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// HasEnv reports whether a flag takes its variable by the rule: every one
// but --version.
func HasEnv(flagName string) bool { return flagName != VersionFlag }

// Parse is how every payguard command line is read: args into fs, then
// every flag the command line left alone from its variable (EnvName),
// when that is set and not empty. It adds --version. -h prints the usage
// to fs's output and returns flag.ErrHelp; a bad flag, a positional
// argument or a bad variable prints it there too and returns a usage
// error (exit 2); --version returns exitcode.ErrVersion.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	rest, err := ParseArgs(fs, args, getenv)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageFailed(fs, fmt.Errorf("unexpected argument %q", rest[0]))
	}
	return nil
}

// ParseArgs is Parse for a command that takes positional arguments:
// flags may stand before, between and after them, and it returns them.
func ParseArgs(fs *flag.FlagSet, args []string, getenv func(string) string) (positional []string, err error) {
	if fs.Lookup(VersionFlag) == nil {
		fs.Bool(VersionFlag, false, "print the build (version, commit, Go) and exit")
	}
	out := fs.Output()
	// The flag package writes its error and the usage on a failure; the
	// usage is written here, the error left to exitcode.Report's one line.
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(out)
			if errors.Is(err, flag.ErrHelp) {
				printUsage(fs)
				return nil, err
			}
			return nil, usageFailed(fs, err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.SetOutput(out)
	if v := fs.Lookup(VersionFlag); v != nil && v.Value.String() == "true" {
		return nil, exitcode.ErrVersion
	}
	if err := ApplyEnv(fs, getenv); err != nil {
		return nil, usageFailed(fs, err)
	}
	return positional, nil
}

// ApplyEnv sets every flag of fs the command line did not set from its
// variable (EnvName), when that is set and not empty (as everywhere in
// payguard, an empty variable is an unset one).
func ApplyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	if getenv == nil {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || !HasEnv(f.Name) {
			return
		}
		name := EnvName(f.Name)
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %v", v, name, f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// usageFailed prints the usage, for a command line found wrong, and
// marks err as a usage error. Under --json (a flag parsed before the
// mistake) the usage is left out: stderr then holds the error's JSON alone.
func usageFailed(fs *flag.FlagSet, err error) error {
	if j := fs.Lookup("json"); j == nil || j.Value.String() != "true" {
		printUsage(fs)
	}
	return exitcode.UsageError(err)
}

// printUsage is every program's usage: the flags, and the rule that
// gives each its variable.
func printUsage(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), "usage of %s (every flag also from its variable %s<FLAG>, e.g. --http-addr: %s):\n",
		fs.Name(), EnvPrefix, EnvName("http-addr"))
	fs.PrintDefaults()
}

// RegisterLogLevel adds --log-level, the least level a long-running
// program logs (debug, info, warn or error; info by default).
func RegisterLogLevel(fs *flag.FlagSet, level *slog.Level) {
	*level = slog.LevelInfo
	fs.TextVar(level, "log-level", slog.LevelInfo, "least level logged: debug, info, warn or error")
}
