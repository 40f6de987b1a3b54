package service_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/worker/service"
)

// --unknown-grace must exceed the longest a create can stay in flight (design
// §1): a frozen sender's create may leave up to activities.SendWindow plus
// --connect-timeout after its record, and a timed-out create was on the wire
// a whole --read-timeout. A shorter grace lets the lookup that grants a
// re-send come while the first create is on its way: a second charge.
func TestTheWorkerRefusesAnUnknownGraceShorterThanACreateInFlight(t *testing.T) {
	none := func(string) string { return "" }
	for _, args := range [][]string{
		{"--unknown-grace", "1s"},                          // below SendWindow (2 s) itself
		{"--unknown-grace", "2500ms"},                      // below SendWindow + --connect-timeout (1 s)
		{"--unknown-grace", "3s", "--read-timeout", "10s"}, // below the read timeout: the create may still be in flight
	} {
		_, err := service.ParseFlags(args, none, io.Discard)
		assert.Error(t, err, "%v accepted", args)
	}
}
