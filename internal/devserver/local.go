package devserver

import (
	"fmt"
	"os"
	"path/filepath"
)

// Where the local stack's pieces are found, for the tests and chaos alike.

// TemporalCLI finds the temporal binary: PAYGUARD_TEMPORAL_CLI, else bin/
// at the module root.
func TemporalCLI() (string, error) {
	if p := os.Getenv("PAYGUARD_TEMPORAL_CLI"); p != "" {
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no temporal CLI at %s: run `make tools`", p)
	}
	return p, nil
}

// ModuleRoot is the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("module root not found")
		}
		dir = parent
	}
}

// AdminDatabaseURL is the PostgreSQL server the tests and chaos create
// their fresh databases on (PAYGUARD_TEST_DATABASE_URL, else the local one).
func AdminDatabaseURL() string {
	if u := os.Getenv("PAYGUARD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}
