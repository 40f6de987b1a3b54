package workflows

import "go.temporal.io/sdk/workflow"

// versionMoneySafety gates the fixes of the money-safety review, in
// effect for runs started after them: Reserve waits for an operator's cancel
// to let it end; the create retries a database outage for as long as it
// lasts, counts creates from the database, treats any failure it cannot
// classify as an unknown outcome and authorises each re-send explicitly; a
// FAILED answer decides only when no other transaction of the order is live;
// and a final order status never moves.
//
// Later changes of the payment workflow's commands take the next version of
// the same change ID rather than one of their own: each GetVersion a run asks
// costs it a marker and a search-attribute upsert (the SDK's
// TemporalChangeVersion), and every order pays that.
//
// localSteps (2): the order's database steps run as local activities
// (dbStep) and search attributes are upserted only when they change.
//
// localCreate (3): the create runs as a local activity too (sendLocally),
// and REQUESTING reaches the search attributes only if the create goes on
// as a regular activity: a create answered inside the task that sent it
// goes straight to PENDING (or UNKNOWN, or FAILED) in one upsert.
//
// reserveRecalls (4): Reserve's answer is the order as the database holds
// it, read by a run of the first workflow task again (its worker died, or
// the server refused to close the workflow while a signal or a cancel
// waited), whose history has no marker of what the first run did (recall):
// an order it settled ends as settled, and a create that may have reached
// the gateway makes a cancel search the gateway by order. And a cancel whose
// compensation finds the order already FAILED ends the workflow as the
// refusal did, completed, not cancelled.
//
// fencedCancel (5): a compensation that did not search the gateway by order
// tells CancelOrder so, and when CancelOrder finds a create that may have
// reached the gateway after all (a run whose view is older than the
// database's: an earlier run of its task stalled, not dead, and went on),
// it searches the gateway by order, cancels what it finds, and cancels the
// order again.
const (
	versionMoneySafety = "money-safety"
	moneySafe          = workflow.Version(1)
	localSteps         = workflow.Version(2)
	localCreate        = workflow.Version(3)
	reserveRecalls     = workflow.Version(4)
	fencedCancel       = workflow.Version(5)
)

// idRuleChange versions the id rule's check (package ids) in setup.
const idRuleChange = "id-rule"
