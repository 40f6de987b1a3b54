package harness

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/payguard/payguard/workflows"
)

// History is the server's work for one completed workflow of a ladder, by
// its history: what payguard asks of Temporal beside the baselines.
type History struct {
	Of         string         `json:"of"` // the ladder
	WorkflowID string         `json:"workflowId"`
	Events     int            `json:"events"`
	Bytes      int            `json:"bytes"`
	ByType     map[string]int `json:"eventsByType"`
	// VisibilityWrites are the visibility records the server writes for
	// the run: its start, each search-attribute upsert and its close.
	VisibilityWrites int `json:"visibilityWrites"`
}

// readHistory reads the history of the order's workflow.
func readHistory(ctx context.Context, cl client.Client, orderID string) (History, error) {
	h := History{WorkflowID: workflows.PaymentWorkflowID(orderID), ByType: map[string]int{}, VisibilityWrites: 2}
	it := cl.GetWorkflowHistory(ctx, h.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return History{}, err
		}
		h.Events++
		h.Bytes += proto.Size(e)
		h.ByType[e.GetEventType().String()]++ // "ActivityTaskScheduled"
		if e.GetEventType() == enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES {
			h.VisibilityWrites++
		}
	}
	if h.Events == 0 {
		return History{}, fmt.Errorf("workflow %s has no history", h.WorkflowID)
	}
	return h, nil
}

// typesLine is the event types, the most frequent first.
func (h History) typesLine() string {
	types := slices.SortedFunc(maps.Keys(h.ByType), func(a, b string) int {
		return cmp.Or(cmp.Compare(h.ByType[b], h.ByType[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s %d", t, h.ByType[t])
	}
	return strings.Join(parts, ", ")
}
