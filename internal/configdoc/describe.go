package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/payguard/payguard/config"
)

// A row is one flag as the table shows it.
type row struct {
	name, env, def, usage string
	// varies: the default is new each time the program starts (a seed
	// from the clock), so the table cannot show one.
	varies bool
}

// A described command line: its flags by name, and the variables it
// reads that no flag takes its default from.
type described struct {
	title   string
	rows    []row
	envOnly []string
}

// describe builds a command line's flag set in an empty environment and
// reads off each flag; environment finds which variable each one reads.
func describe(title string, build builder) (described, error) {
	var asked []string
	base, err := build(func(key string) string {
		if !slices.Contains(asked, key) {
			asked = append(asked, key)
		}
		return ""
	})
	if err != nil {
		return described{}, err
	}
	again, err := build(noEnv)
	if err != nil {
		return described{}, err
	}
	varies := map[string]bool{}
	again.VisitAll(func(f *flag.Flag) {
		if b := base.Lookup(f.Name); b == nil || b.DefValue != f.DefValue {
			varies[f.Name] = true
		}
	})
	env, envOnly, err := environment(build, base, asked, varies)
	if err != nil {
		return described{}, fmt.Errorf("%s: %w", title, err)
	}
	d := described{title: title, envOnly: envOnly}
	base.VisitAll(func(f *flag.Flag) { // in name order
		d.rows = append(d.rows, row{name: f.Name, env: withRule(f.Name, env[f.Name]), def: f.DefValue, usage: f.Usage, varies: varies[f.Name]})
	})
	return d, nil
}

func noEnv(string) string { return "" }

// withRule puts first the variable config.Parse reads for every flag
// (config.EnvName), then those its default reads (older names it wins
// over), once each.
func withRule(flagName, fromDefault string) string {
	if !config.HasEnv(flagName) {
		return fromDefault
	}
	names := []string{config.EnvName(flagName)}
	for _, n := range strings.Split(fromDefault, ", ") {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// probes are values a variable is set to in turn to see which flag's
// default follows it: "1" for a flag on when its variable is "1", the
// others for a default that is "1" already.
var probes = []string{"1", "2", "configdoc-probe"}

// environment is the one place the table's environment column comes
// from: the variable each flag takes its default from, found by building
// the set again with each variable the first build read set on its own,
// and seeing which defaults follow. A variable that moves no default is
// read for something other than a flag (envOnly). Variables applied when
// the flags are parsed, not through their defaults (config.EnvName's
// rule), are named by withRule.
func environment(build builder, base *flag.FlagSet, asked []string, varies map[string]bool) (byFlag map[string]string, envOnly []string, err error) {
	byFlag = map[string]string{}
	for _, key := range asked {
		moved := false
		for _, probe := range probes {
			fs, err := build(func(k string) string {
				if k == key {
					return probe
				}
				return ""
			})
			if err != nil {
				return nil, nil, err
			}
			fs.VisitAll(func(f *flag.Flag) {
				b := base.Lookup(f.Name)
				if b == nil || varies[f.Name] || b.DefValue == f.DefValue {
					return
				}
				moved = true
				if !slices.Contains(strings.Split(byFlag[f.Name], ", "), key) {
					byFlag[f.Name] = strings.TrimPrefix(byFlag[f.Name]+", "+key, ", ")
				}
			})
		}
		if !moved {
			envOnly = append(envOnly, key)
		}
	}
	return byFlag, envOnly, nil
}
