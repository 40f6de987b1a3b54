// Package ids owns the one rule every identifier payguard accepts follows:
// order, product and user ids are 1–64 characters of A–Z a–z 0–9 . _ : -,
// and an order placed now at least MinOrderLen (CheckNewOrder).
//
// An id travels into a Temporal workflow id, PostgreSQL text columns, a JSON
// body, a URL query and the X-USER-ID header. This set needs no escaping in
// any of them: no NUL (PostgreSQL refuses it, so a write would fail and be
// retried forever), no CR or LF (HTTP cannot carry them in a header), no '/'
// or '?' (they change a path), and 64 keeps the workflow id, the idempotency
// key and every log line short. Every entry point (starter, workflow input,
// store, gateway client, pgsim) checks here before anything is reserved, so
// an id that would fail half-way — after stock is held — is refused at the
// door with the same message everywhere.
package ids

import (
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"
)

// Kinds of identifier, as messages name them.
const (
	Order   = "order"
	Product = "product"
	User    = "user"
)

// MaxLen is the longest id accepted, in characters (all of them ASCII).
const MaxLen = 64

// MinOrderLen is the shortest id of an order placed now: the gateways
// payguard speaks to (the Loopers simulator, Toss) want an orderId of 6–64
// characters, and an order they would refuse must be refused before its
// stock is reserved, not end FAILED at the gateway. Orders already in the
// books keep CheckOrder's 1–64, so they can still be read, settled,
// cancelled and swept.
const MinOrderLen = 6

// Allowed names the accepted characters, for messages and documentation.
const Allowed = "A–Z a–z 0–9 . _ : -"

var pattern = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9._:-]{1,%d}$`, MaxLen))

// ErrInvalid matches every id refused by the rule (errors.Is).
var ErrInvalid = errors.New("invalid id")

// Error is an id refused by the rule.
type Error struct {
	Kind  string // Order, Product or User
	Value string
	Min   int // the shortest length allowed; 0 is 1
}

// Error names the kind, quotes the value safely and states the rule.
func (e *Error) Error() string {
	return fmt.Sprintf("%s id %s must be %d–%d characters of %s", e.Kind, quote(e.Value), max(e.Min, 1), MaxLen, Allowed)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Valid reports whether value follows the rule.
func Valid(value string) bool { return pattern.MatchString(value) }

// Check returns an *Error naming kind when value breaks the rule, else nil.
func Check(kind, value string) error {
	if Valid(value) {
		return nil
	}
	return &Error{Kind: kind, Value: value}
}

// CheckOrder checks an order id.
func CheckOrder(value string) error { return Check(Order, value) }

// CheckNewOrder checks the id of an order being placed: CheckOrder's rule,
// and at least MinOrderLen characters.
func CheckNewOrder(value string) error {
	if Valid(value) && len(value) >= MinOrderLen {
		return nil
	}
	return &Error{Kind: Order, Value: value, Min: MinOrderLen}
}

// CheckProduct checks a product id.
func CheckProduct(value string) error { return Check(Product, value) }

// CheckUser checks a user id.
func CheckUser(value string) error { return Check(User, value) }

// quote shows a value in Go syntax, so control bytes and invalid UTF-8 are
// visible and cannot break a log line or a terminal; one far over the limit
// is cut (at a character boundary) with its length, so a 64 KiB id cannot
// flood the message that refuses it.
func quote(value string) string {
	if len(value) <= MaxLen+16 {
		return fmt.Sprintf("%q", value)
	}
	cut := MaxLen
	for cut > 0 && !utf8.RuneStart(value[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", value[:cut], len(value))
}
