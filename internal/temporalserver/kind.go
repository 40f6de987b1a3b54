package temporalserver

import (
	"fmt"
	"strings"
)

// Kind is which Temporal a stack runs on: the CLI's dev server (one
// process on SQLite, the default) or the real server on PostgreSQL. The
// demo, chaos and the bench take it as --temporal, the tests as
// PAYGUARD_TEMPORAL.
type Kind string

// The kinds.
const (
	KindDev    Kind = "dev"
	KindServer Kind = "server"
)

// KindEnv picks the tests' Temporal (KindDev when unset).
const KindEnv = "PAYGUARD_TEMPORAL"

// KindFlagUsage is the --temporal flag's usage, one text for every command.
const KindFlagUsage = "which Temporal the stack runs on: dev (the CLI's dev server on SQLite) or server (the Temporal server on PostgreSQL, `make temporal-server-bin`)"

// ParseKind reads a --temporal value or PAYGUARD_TEMPORAL ("" is KindDev).
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case "", KindDev:
		return KindDev, nil
	case KindServer:
		return KindServer, nil
	}
	return "", fmt.Errorf("temporal %q: want %s or %s", s, KindDev, KindServer)
}

// String is the flag value.
func (k Kind) String() string { return string(k) }

// Server names the server of this kind in words: "dev server" or
// "Temporal server".
func (k Kind) Server() string {
	if k == KindServer {
		return "Temporal server"
	}
	return "dev server"
}

// Set parses a flag value (flag.Value).
func (k *Kind) Set(s string) error {
	v, err := ParseKind(s)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// DynamicConfigArgs turns a dev server's --dynamic-config-value key=value
// arguments (devserver.TuningArgs, EagerArgs) into the real server's
// dynamic config values, for a stack that takes either.
func DynamicConfigArgs(args []string) (map[string]any, error) {
	out := map[string]any{}
	for i := 0; i < len(args); i++ {
		if args[i] != "--dynamic-config-value" || i+1 == len(args) {
			return nil, fmt.Errorf("the real server takes only --dynamic-config-value key=value, not %q", args[i])
		}
		i++
		k, v, ok := strings.Cut(args[i], "=")
		if !ok {
			return nil, fmt.Errorf("--dynamic-config-value %q: want key=value", args[i])
		}
		out[k] = v
	}
	return out, nil
}
