// Command configdoc writes docs/configuration.md, the table of every flag
// of every payguard program, from the programs' own flag sets: `make
// config-doc`. Its test fails when the file and the flag sets differ.
package main

//go:generate go run -buildvcs=false . -o ../../docs/configuration.md

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "configdoc:", err)
		}
		os.Exit(1)
	}
}

// run writes the configuration table to -o, or to stdout without it, or
// checks the file -check names against it.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("configdoc", flag.ContinueOnError)
	out := fs.String("o", "", "write the table to this file (replaced only once the whole table is made) instead of stdout")
	check := fs.String("check", "", "write nothing: fail if this file is not the table the flag sets make")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	doc, err := generate()
	if err != nil {
		return err
	}
	if *check != "" {
		return checkCurrent(*check, doc)
	}
	if *out == "" {
		_, err := stdout.Write(doc)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".configuration-*.md")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, bytes.NewReader(doc)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), *out)
}

// checkCurrent fails, saying how to regenerate it, when the file at path
// is not doc.
func checkCurrent(path string, doc []byte) error {
	have, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: run %s", err, regenerate)
	}
	if bytes.Equal(have, doc) {
		return nil
	}
	haveLines, docLines := strings.Split(string(have), "\n"), strings.Split(string(doc), "\n")
	n := 0
	for n < len(haveLines) && n < len(docLines) && haveLines[n] == docLines[n] {
		n++
	}
	line := func(lines []string) string {
		if n < len(lines) {
			return fmt.Sprintf("%q", lines[n])
		}
		return "(end of file)"
	}
	return fmt.Errorf("%s is not what the flag sets make: run %s\nfirst difference, line %d:\n  file:       %s\n  flag sets:  %s",
		path, regenerate, n+1, line(haveLines), line(docLines))
}
