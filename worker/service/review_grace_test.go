package service_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/worker/service"
)

// Review: activities.SendWindow says "the worker refuses a grace that is
// not [well above the send window]" and design §1 says --unknown-grace
// "must exceed the longest a request can stay in flight" (a frozen sender's
// create may leave up to SendWindow + --connect-timeout after its record; a
// timed-out create may be in flight for --read-timeout). The worker accepts
// any positive grace: with these, the lookup that grants a re-send can come
// while the first create is still on its way, and the re-send charges twice.
func TestReviewTheWorkerRefusesAnUnknownGraceShorterThanACreateInFlight(t *testing.T) {
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
