package testenv

import (
	"context"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// HistoryHas: the workflow's history holds an event of the type.
func HistoryHas(t testing.TB, workflowID string, typ enumspb.EventType) bool {
	return FirstEventID(t, workflowID, typ) != 0
}

// FirstEventID is the id of the first event of the type in the workflow's
// history, 0 when there is none.
func FirstEventID(t testing.TB, workflowID string, typ enumspb.EventType) int64 {
	t.Helper()
	iter := Temporal(t).GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatalf("read the history of %s: %v", workflowID, err)
		}
		if e.GetEventType() == typ {
			return e.GetEventId()
		}
	}
	return 0
}
