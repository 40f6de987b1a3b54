package ids_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/ids"
)

// The boundaries of the rule: 64 characters pass and 65 do not, empty is
// refused, every allowed punctuation mark passes alone and inside an id, and
// the bytes that broke the system before (NUL, CR, LF) are refused.
func TestRuleBoundaries(t *testing.T) {
	valid := []string{
		"a", "Z", "0", ".", "_", ":", "-",
		"ord-1", "order.2026_11:30-x", "P1", "user-1",
		strings.Repeat("a", ids.MaxLen),
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ-abcdefghijklmnopqrstuvwxyz.0123456789", // 64: every letter and digit
		"a.b_c:d-e", "-", "..", "::", // punctuation anywhere, even alone
	}
	for _, v := range valid {
		assert.True(t, ids.Valid(v), "%q", v)
		assert.NoError(t, ids.CheckOrder(v), "%q", v)
	}
	invalid := []string{
		"",
		strings.Repeat("a", ids.MaxLen+1),
		strings.Repeat("x", 200),
		"o\x00", "\x00", "u\r", "u\n1", "a b", "a/b", "a?b", "a#b", "a%2F", "a\tb", "ordér", "a+b", "a@b", "\xff",
	}
	for _, v := range invalid {
		assert.False(t, ids.Valid(v), "%q", v)
		err := ids.CheckUser(v)
		require.Error(t, err, "%q", v)
		assert.True(t, errors.Is(err, ids.ErrInvalid), "%q matches ErrInvalid", v)
	}
}

func TestMessageNamesTheKindQuotesTheValueAndStatesTheRule(t *testing.T) {
	assert.EqualError(t, ids.CheckOrder("o\x001"), `order id "o\x001" must be 1–64 characters of A–Z a–z 0–9 . _ : -`)
	assert.EqualError(t, ids.CheckUser("u\r"), `user id "u\r" must be 1–64 characters of A–Z a–z 0–9 . _ : -`)
	assert.EqualError(t, ids.CheckProduct(""), `product id "" must be 1–64 characters of A–Z a–z 0–9 . _ : -`)

	// A huge id is cut, not echoed whole, and its length is given.
	msg := ids.CheckOrder(strings.Repeat("x", 70_000)).Error()
	assert.Less(t, len(msg), 200)
	assert.Contains(t, msg, `"`+strings.Repeat("x", ids.MaxLen)+`"… (70000 bytes)`)
	// The cut never splits a character.
	msg = ids.CheckOrder(strings.Repeat("é", 100)).Error()
	assert.Contains(t, msg, `"`+strings.Repeat("é", ids.MaxLen/2)+`"… (200 bytes)`)
}

// An order placed now has an id of 6–64 characters: the gateways refuse a
// shorter orderId. An order already in the books keeps 1–64.
func TestNewOrderIDsAreAtLeastSixCharacters(t *testing.T) {
	for _, v := range []string{"a", "o1", "ord-1", "", "o\x00rder-1", strings.Repeat("a", ids.MaxLen+1)} {
		err := ids.CheckNewOrder(v)
		require.Error(t, err, "%q", v)
		assert.ErrorIs(t, err, ids.ErrInvalid)
		assert.Contains(t, err.Error(), "must be 6–64 characters of "+ids.Allowed)
	}
	for _, v := range []string{"ord-12", strings.Repeat("a", ids.MaxLen)} {
		assert.NoError(t, ids.CheckNewOrder(v), "%q", v)
	}
	assert.NoError(t, ids.CheckOrder("o1"), "an order in the books")
}
