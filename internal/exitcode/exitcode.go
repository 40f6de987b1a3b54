// Package exitcode is how every payguard binary ends (docs/design.md §6):
// one exit code for each kind of outcome, the same in every command, and
// an error as one line on stderr (one JSON object under --json), so a
// script can tell a usage mistake from an unreachable service from an
// order that failed.
package exitcode

import (
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/payguard/payguard/status"
)

// The exit codes. They are a contract with scripts: add, never renumber.
const (
	OK          = 0 // done; for an order awaited, CONFIRMED
	Error       = 1 // anything else that went wrong
	Usage       = 2 // the flags, arguments or their environment are wrong; nothing was done
	Unavailable = 3 // a service (Temporal, PostgreSQL, the worker) could not be reached
	Failed      = 4 // the order awaited ended FAILED
	Cancelled   = 5 // the order awaited ended CANCELLED
	Rejected    = 6 // the order awaited ended REJECTED (out of stock, a bad order)
)

// kinds name the codes in a --json error's "kind".
var kinds = map[int]string{
	OK: "ok", Error: "error", Usage: "usage", Unavailable: "unavailable",
	Failed: "failed", Cancelled: "cancelled", Rejected: "rejected",
}

// Kind is the name of a code, "error" for one it does not know.
func Kind(code int) string {
	if k, ok := kinds[code]; ok {
		return k
	}
	return kinds[Error]
}

// ErrVersion asks Main to print the build and exit 0: what a program's
// parsing returns for --version.
var ErrVersion = errors.New("version requested")

// coded is an error with its exit code.
type coded struct {
	err  error
	code int
}

func (c *coded) Error() string { return c.err.Error() }
func (c *coded) Unwrap() error { return c.err }

// With gives err the exit code; nil stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &coded{err: err, code: code}
}

// UsageError marks err as a mistake in the command line (exit 2).
func UsageError(err error) error { return With(Usage, err) }

// UnavailableError marks err as a service out of reach (exit 3).
func UnavailableError(err error) error { return With(Unavailable, err) }

// OfOrder is the exit code of an order that ended in s: 0 for CONFIRMED,
// its own code for each other final status, Error for one not final.
func OfOrder(s status.Order) int {
	switch s {
	case status.OrderConfirmed:
		return OK
	case status.OrderFailed:
		return Failed
	case status.OrderCancelled:
		return Cancelled
	case status.OrderRejected:
		return Rejected
	}
	return Error
}

// Code is the exit code err ends a program with: 0 for nil, -h and
// --version; the code it was given; Unavailable for a dial that failed
// (a net.OpError the error chain carries, as pgx's and gRPC's do); else Error.
func Code(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, ErrVersion) {
		return OK
	}
	var c *coded
	if errors.As(err, &c) {
		return c.code
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Unavailable
	}
	return Error
}

// Final is the error of an awaited order that ended other than CONFIRMED:
// the order itself has been printed; the error carries its exit code.
func Final(orderID string, s status.Order, reason string) error {
	code := OfOrder(s)
	if code == OK {
		return nil
	}
	msg := fmt.Sprintf("order %s ended %s", orderID, s)
	if reason != "" {
		msg += ": " + reason
	}
	return With(code, errors.New(msg))
}
