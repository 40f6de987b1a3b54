package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// Lookup hints: an unsigned callback (the worker's --callback-auth lookup
// mode) is news that something happened, never what happened. Anyone can
// send one, so it only moves the next status lookup to now; the lookup goes
// through the breaker like every poll, and only the gateway's answer decides.
// A forged SUCCESS therefore confirms nothing, and with the breaker open the
// hint's lookup is UNAVAILABLE — no answer — so the order waits for the next
// poll (or hint) as it would anyway.

// onHint handles the hints waiting on c with one lookup: a burst of
// callbacks (duplicates, or a flood of forgeries) costs one gateway call.
func (p *payment) onHint(ctx workflow.Context, c workflow.ReceiveChannel) {
	var hints []LookupHint
	var h LookupHint
	for c.ReceiveAsync(&h) {
		hints = append(hints, h)
		h = LookupHint{}
	}
	if len(hints) == 0 {
		return
	}
	// Anyone can send hints, at any rate: a hint brings the next lookup
	// forward, it never adds lookups beyond one between two regular polls,
	// so a flood costs the gateway, the breaker and the history at most what
	// polling twice as often would. Hints in between are dropped; the regular
	// polls go on.
	if p.hintLooked {
		return
	}
	p.hintLooked = true
	// A key the workflow does not track may be a create it never heard
	// back from: ask for all the order's transactions. The answer lists
	// only this order's, so a forged key cannot bring in anything else.
	search := ""
	for _, h := range hints {
		if h.TransactionKey != "" && !slices.Contains(p.keys, h.TransactionKey) {
			search = "an unsigned callback named another"
		}
	}
	p.log.Info("lookup hint: looking the order up now", "hints", len(hints), "transaction_key", hints[0].TransactionKey,
		"claimed_status", hints[0].Status, "by_order", search != "")
	p.poll(ctx, search)
}
