// Package e2e holds the end-to-end tests: the articles' experiments run on
// the real stack (Temporal dev server, PostgreSQL, pgsim, the worker, the
// starter) and checked against their numbers.
package e2e
