package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/telemetry"
)

// regenerate is how to bring docs/configuration.md up to date.
const regenerate = "`make config-doc` (go run ./internal/configdoc -o docs/configuration.md)"

// generate makes docs/configuration.md.
func generate() ([]byte, error) {
	common, err := describe("shared", shared)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!-- Generated from the programs' flag sets by %s: do not edit by hand. -->

# Configuration

Every flag of every payguard program, made from the programs' own flag sets; a test fails when this
file and the code differ. Every flag reads the variable `+"`PAYGUARD_<FLAG>`"+`, the flag's name
upper-cased with `+"`-` as `_`"+` (`+"`--http-addr`: `PAYGUARD_HTTP_ADDR`; `config.EnvName`"+`), listed first in
the environment column; some also read an older name, listed after it, that `+"`PAYGUARD_<FLAG>`"+` wins
over. A variable counts when set and not empty; the flag on the command line wins over every
variable. The defaults are the code's in an empty environment. Every program also takes `+"`-h`"+`
(the usage, on stderr) and `+"`--version`"+` (the build, on stdout), which read no variable; its exit
codes are docs/design.md §6's.

## Shared flags

The worker and every starter command take these (`+"`config.Common`"+`).

`, regenerate)
	table(&b, common.rows)
	envOnly(&b, common.envOnly)
	for _, p := range programs() {
		if err := section(&b, p, common); err != nil {
			return nil, err
		}
	}
	outside(&b)
	return b.Bytes(), nil
}

// section is one program's flags, less the shared ones and, for a program
// with several command lines, less those every one of them takes.
func section(b *bytes.Buffer, p program, common described) error {
	var lines []described
	for _, l := range p.lines {
		d, err := describe(l.title, l.build)
		if err != nil {
			return err
		}
		lines = append(lines, d)
	}
	fmt.Fprintf(b, "\n## %s\n\n`go run ./%s`: %s\n", p.name, p.name, p.about)
	sharedToo := true
	for i := range lines {
		var all bool
		lines[i].rows, all = without(lines[i].rows, common.rows)
		lines[i].envOnly, _ = without(lines[i].envOnly, common.envOnly)
		sharedToo = sharedToo && all
	}
	if sharedToo {
		fmt.Fprintf(b, "\nBeside its own flags, %s takes the [shared flags](#shared-flags).\n", every(p, lines))
	}
	if len(lines) == 1 {
		b.WriteString("\n")
		table(b, lines[0].rows)
		envOnly(b, lines[0].envOnly)
		return nil
	}
	everyOne := lines[0].rows
	for _, l := range lines[1:] {
		everyOne = intersect(everyOne, l.rows)
	}
	if len(everyOne) > 0 {
		fmt.Fprintf(b, "\n### Every %s command\n\n", p.name)
		table(b, everyOne)
	}
	for _, l := range lines {
		fmt.Fprintf(b, "\n### %s\n\n", l.title)
		rest, _ := without(l.rows, everyOne)
		if len(rest) == 0 {
			b.WriteString("No flags of its own.\n")
		} else {
			table(b, rest)
		}
		envOnly(b, l.envOnly)
	}
	return nil
}

func every(p program, lines []described) string {
	if len(lines) > 1 {
		return "every " + p.name + " command"
	}
	return "the " + p.name
}

// table writes rows as a markdown table.
func table(b *bytes.Buffer, rows []row) {
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		env := "—"
		if r.env != "" {
			env = "`" + strings.ReplaceAll(r.env, ", ", "`, `") + "`"
		}
		fmt.Fprintf(b, "| `--%s` | %s | %s | %s |\n", r.name, env, defaultCell(r), cell(r.usage))
	}
}

// defaultCell shows a default, a secret's only as config.MaskSecret does.
func defaultCell(r row) string {
	switch {
	case r.varies:
		return "new each run"
	case r.def != "" && (strings.Contains(r.name, "secret") || strings.Contains(r.name, "token")):
		return cell(config.MaskSecret(r.def))
	case r.def == "":
		return "`\"\"`"
	}
	return "`" + strings.ReplaceAll(r.def, "|", `\|`) + "`"
}

// cell escapes text for a table cell: the pipes that would end it, and
// angle brackets a renderer would take for HTML.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}

func envOnly(b *bytes.Buffer, vars []string) {
	if len(vars) == 0 {
		return
	}
	fmt.Fprintf(b, "\nRead from the environment with no flag: `%s`.\n", strings.Join(vars, "`, `"))
}

// outside lists what the programs read beyond their flag sets.
func outside(b *bytes.Buffer) {
	fmt.Fprintf(b, `
## Outside the flags

- The worker's and the starter's Temporal client also reads Temporal's client config, below the
  flags: the environment the SDK reads (`+"`TEMPORAL_API_KEY`, `TEMPORAL_TLS*`, `TEMPORAL_GRPC_META_*`"+`)
  and, below it, the profile `+"`TEMPORAL_PROFILE`"+` of the file `+"`TEMPORAL_CONFIG_FILE`"+` (see
  [docs/design.md](design.md)).
- `+"`%s`"+` (worker, starter, pgsim, API): where traces are exported to; unset (and no `+"`%s`"+`),
  none are. The other standard variables apply (contrib's autoexport and the SDK's resource
  detection): `+"`OTEL_EXPORTER_OTLP_PROTOCOL`"+` (`+"`http/protobuf`"+` by default, `+"`grpc`"+`),
  `+"`OTEL_TRACES_EXPORTER`"+` (`+"`otlp`, `console`, `none`"+`), and `+"`OTEL_SERVICE_NAME`"+` or
  `+"`OTEL_RESOURCE_ATTRIBUTES`"+`, whose service.name wins over the program's own.
- The demo reads `+"`DATABASE_URL`, `%s` and `%s`"+` as the worker does.
- chaos and bench find the temporal CLI at `+"`PAYGUARD_TEMPORAL_CLI`"+` (else `+"`bin/temporal`"+`) and make
  their databases on `+"`PAYGUARD_TEST_DATABASE_URL`"+` (else the local PostgreSQL).
`, telemetry.EndpointEnv, telemetry.TracesExporterEnv, codec.KeysEnv, codec.KeyFileEnv)
}

// without is a's items not in drop, and whether a held every one of drop.
func without[T comparable](a, drop []T) (rest []T, all bool) {
	all = true
	for _, d := range drop {
		all = all && contains(a, d)
	}
	for _, x := range a {
		if !contains(drop, x) {
			rest = append(rest, x)
		}
	}
	return rest, all
}

func intersect[T comparable](a, b []T) []T {
	var out []T
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains[T comparable](a []T, x T) bool {
	for _, y := range a {
		if x == y {
			return true
		}
	}
	return false
}
