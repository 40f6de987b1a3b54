// Package testenv starts and hands out the real services that payguard's
// tests run against: a fresh PostgreSQL database per test, a Temporal dev
// server per test binary, and an in-process gateway simulator. A test that
// needs a service and cannot reach it fails; it never skips quietly.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/store"
)

// NewDatabase creates an empty database for this test, dropped when the test
// ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	NeedsServices(t, "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, devserver.AdminDatabaseURL())
	if err != nil {
		t.Fatalf("postgres is not reachable at %s (run `make postgres`): %v", devserver.AdminDatabaseURL(), err)
	}
	defer admin.Close(ctx)
	name := "payguard_test_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, devserver.AdminDatabaseURL())
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(devserver.AdminDatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Store returns a migrated store on a fresh database of its own.
func Store(t testing.TB) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// ID returns a fresh identifier with a readable prefix.
func ID(prefix string) string { return prefix + "-" + randomHex(5) }
