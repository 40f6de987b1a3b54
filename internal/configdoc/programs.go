package main

import (
	"flag"

	"github.com/payguard/payguard/api/httpapi"

	"github.com/payguard/payguard/bench/harness"
	"github.com/payguard/payguard/chaos/runner"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/worker/service"
)

// A builder makes one command line's flag set, defaults read through getenv.
type builder func(getenv func(string) string) (*flag.FlagSet, error)

// A commandLine is one way to run a program, with its flags.
type commandLine struct {
	title string // as typed: "worker", "starter stock set"
	build builder
}

// A program is one of payguard's binaries (a directory with a main.go).
type program struct {
	name  string
	about string
	lines []commandLine
}

// programs are every payguard binary, each with its command lines.
func programs() []program {
	var starter []commandLine
	for _, name := range cli.Commands() {
		starter = append(starter, commandLine{"starter " + name, func(getenv func(string) string) (*flag.FlagSet, error) {
			return cli.CommandFlags(name, getenv)
		}})
	}
	return []program{
		{"worker", "runs the payment workflows and activities and serves the gateway callback, `/healthz`, `/metrics` and the codec server.",
			[]commandLine{{"worker", withEnv(service.FlagSet)}}},
		{"api", "the HTTP order API: place, read and cancel orders and set stock over HTTP (docs/openapi.yaml), with `/healthz` and `/metrics`.",
			[]commandLine{{"api", withEnv(httpapi.FlagSet)}}},
		{"starter", "payguard's command line: place, cancel and inspect orders, set stock, send a test callback, run a load, run a sweep.",
			starter},
		{"pgsim", "the payment gateway simulator: the gateway API on `--addr`, the admin API on `--admin-addr`.",
			[]commandLine{{"pgsim", withEnv(simulator.FlagSet)}}},
		{"demo", "the outage demo on a local stack it starts (`make demo`).",
			[]commandLine{{"demo", withEnv(outage.FlagSet)}}},
		{"chaos", "seeded faults on a real stack it starts, the books checked (`make chaos`).",
			[]commandLine{{"chaos", withoutEnv(runner.FlagSet)}}},
		{"bench", "payguard beside a no-op workflow on one stack it starts (`make bench`).",
			[]commandLine{{"bench", withoutEnv(harness.FlagSet)}}},
	}
}

// shared is the flag set of config.Common, which the worker and every
// starter command register.
func shared(getenv func(string) string) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("shared", flag.ContinueOnError)
	new(config.Common).Register(fs, getenv)
	return fs, nil
}

func withEnv(f func(getenv func(string) string) *flag.FlagSet) builder {
	return func(getenv func(string) string) (*flag.FlagSet, error) { return f(getenv), nil }
}

func withoutEnv(f func() *flag.FlagSet) builder {
	return func(func(string) string) (*flag.FlagSet, error) { return f(), nil }
}
