package workflows

import (
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

// databaseOptions are those of a database activity (Reserve, Settle,
// RecordEvent): retried on anything but the store's declared refusals, since
// a database that is away comes back.
func databaseOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrOutOfStock, activities.ErrUnknownProduct, activities.ErrIllegalTransition, activities.ErrInvalidOrder}},
		Summary: summary,
	}
}

// localRetryWindow is how long a local database step keeps retrying. A
// local activity's retries end at its schedule-to-close timeout, which
// would default to the 15 s of one try (a PostgreSQL restart outlasts it),
// where a regular activity's go on without end; a year stands in for that.
const localRetryWindow = 365 * 24 * time.Hour

// localDatabaseOptions are databaseOptions for a local activity (dbStep).
func localDatabaseOptions(summary string) workflow.LocalActivityOptions {
	o := databaseOptions(summary)
	return workflow.LocalActivityOptions{ScheduleToCloseTimeout: localRetryWindow, StartToCloseTimeout: o.StartToCloseTimeout,
		RetryPolicy: o.RetryPolicy, Summary: o.Summary}
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
