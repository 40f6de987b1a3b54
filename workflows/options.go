package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/payguard/payguard/activities"
)

// Activity options, one definition per kind of activity, so the payment and
// refund workflows cannot drift apart. The create and the lookup each have a
// single caller and keep their options there (create.go, answers.go). The
// options are not part of a command's identity on replay: a change here
// changes how later attempts retry, never which commands a history holds.

// a is how workflow code names activities: only its method values are used.
var a *activities.Activities

// databaseRefusals are the store's declared refusals: a database step
// that ends with one is answered, not retried.
var databaseRefusals = []string{activities.ErrOutOfStock, activities.ErrUnknownProduct, activities.ErrIllegalTransition, activities.ErrInvalidOrder}

// databaseOptions are those of a database activity (Reserve, Settle,
// RecordEvent): retried on anything but the store's declared refusals, since
// a database that is away comes back.
func databaseOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: databaseRefusals},
		Summary: summary,
	}
}

// A local database step (dbStep) gets localTries tries in the worker, the
// waits between them (0.5, 1, 2 and 4 s) all shorter than a workflow task's
// 10 s timeout, so the SDK retries it in process. A longer wait it would
// put on a server timer, costing the history six events per try — some 17 000
// a day of database outage, towards Temporal's limit on a history — so a step
// still failing after them goes on as a regular activity, whose retries cost
// the history nothing.
const (
	localTries = 5
	// localWindow bounds the local tries: five of at most 15 s each and
	// the 7.5 s between them.
	localWindow = 90 * time.Second
)

// localDatabaseOptions are databaseOptions for a local step's tries.
func localDatabaseOptions(summary string) workflow.LocalActivityOptions {
	o := databaseOptions(summary)
	retry := *o.RetryPolicy
	retry.MaximumAttempts = localTries
	return workflow.LocalActivityOptions{ScheduleToCloseTimeout: localWindow, StartToCloseTimeout: o.StartToCloseTimeout,
		RetryPolicy: &retry, Summary: o.Summary}
}

// verifyOptions are the local VerifyCallback's: a pure check, retried only
// should the worker fail to run it, never on a bad signature.
func verifyOptions(orderID string) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrUnverifiedCallback}},
		Summary:     "Verify a callback's signature for order " + orderID}
}

// outOfLocalTries: a local step ended with an error its regular options
// would retry (not a refusal, not a cancel).
func outOfLocalTries(err error) bool {
	var canceled *temporal.CanceledError
	if err == nil || errors.As(err, &canceled) {
		return false
	}
	return retriedUnless(err, databaseRefusals)
}

// retriedUnless: an error Temporal retries under options that list answers
// as non-retryable — not one of them, not marked non-retryable; a timeout
// or any other failure is retried.
func retriedUnless(err error, answers []string) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return !appErr.NonRetryable() && !slices.Contains(answers, appErr.Type())
	}
	return true
}

// cancelOptions are those of a cancel at the gateway: retried without end
// until the gateway acknowledges, since a charge left standing is money taken.
func cancelOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:             summary,
	}
}
