package activities_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
)

// classRow is one row of docs/gateway-api.md's create classification table.
type classRow struct {
	what, class, outcome string
}

// classTable reads the table under "How payguard classifies a create's
// answer" in docs/gateway-api.md.
func classTable(t *testing.T) []classRow {
	t.Helper()
	raw, err := os.ReadFile("../docs/gateway-api.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(raw), "## How payguard classifies a create's answer\n")
	require.True(t, found, "docs/gateway-api.md has the classification section")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []classRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "|") || len(cells) != 4 || strings.HasPrefix(cells[0], "---") || strings.TrimSpace(cells[0]) == "what the create got" {
			continue
		}
		word := func(cell string) string { return strings.Fields(strings.Trim(strings.TrimSpace(cell), "`"))[0] }
		rows = append(rows, classRow{what: strings.TrimSpace(cells[0]), class: word(cells[1]), outcome: strings.Trim(word(cells[2]), "`")})
	}
	return rows
}

var classes = map[string]error{"ErrUnreachable": gateway.ErrUnreachable, "ErrRejected": gateway.ErrRejected,
	"ErrOutcomeUnknown": gateway.ErrOutcomeUnknown, "ErrInvalidRequest": gateway.ErrInvalidRequest}

var statusCode = regexp.MustCompile(`\b[1-5]\d\d\b`)

// docs/gateway-api.md says how each answer to a create is classified; a
// create sent to pgsim for each status and failure it names that pgsim can
// produce comes back classified so, by the client and by the activity.
func TestGatewayAPIDocClassifiesCreatesAsTheCode(t *testing.T) {
	rows := classTable(t)
	sim := testenv.Pgsim(t, testenv.QuietFaults())
	c, err := gateway.New(gateway.Config{BaseURL: sim.GatewayURL(), ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	create := func() error {
		_, err := c.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: testenv.ID("classify"), Amount: 5000,
			CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", CallbackURL: "http://127.0.0.1:1/cb"}, "u1", "")
		return err
	}
	check := func(row classRow, what string, err error) {
		t.Helper()
		class, ok := classes[row.class]
		require.True(t, ok, "row %q names a class the client has: %s", row.what, row.class)
		assert.True(t, errors.Is(err, class), "%s: the client says %v, the doc %s", what, err, row.class)
		assert.Equal(t, row.outcome, activities.ClassifyCreate(err).Outcome, "%s: the attempt outcome (%v)", what, err)
	}

	covered := map[string]bool{}
	for _, row := range rows {
		switch {
		case strings.HasPrefix(row.what, "no connection"):
			testenv.PatchFaults(t, sim, map[string]any{"down": true})
			check(row, "gateway down", create())
			testenv.PatchFaults(t, sim, map[string]any{"down": false})
			covered["down"] = true
		case strings.HasPrefix(row.what, "read timeout"):
			testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"timeoutRate": 1, "timeoutDelay": "2s"}})
			check(row, "read timeout", create())
			testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"timeoutRate": 0}})
			covered["read timeout"] = true
		default:
			for _, code := range statusCode.FindAllString(row.what, -1) {
				n, _ := strconv.Atoi(code)
				if n < 400 {
					continue // pgsim injects 4xx and 5xx only
				}
				testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"failNext": 1, "errorStatus": n}})
				check(row, "HTTP "+code, create())
				covered[code] = true
			}
		}
	}
	// The statuses that differ from "4xx: rejected, 5xx: unknown", and one
	// of each plain kind, must stay in the table.
	for _, must := range []string{"down", "read timeout", "400", "401", "403", "404", "408", "409", "422", "429", "500", "503"} {
		assert.True(t, covered[must], "docs/gateway-api.md's table names %s", must)
	}
}

// Only the gateway's own complete 5xx answer proves nothing is in flight:
// a proxy's 502/504, or a 5xx without the gateway's error body, waits the
// full grace.
func TestOnlyTheGatewaysOwn5xxIsAnsweredInFull(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 500, Code: "INTERNAL_ERROR"}, true},
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 503, Code: "INTERNAL_ERROR"}, true},
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 502, Code: "BAD_GATEWAY"}, false},
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 504, Code: "TIMEOUT"}, false},
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 500}, false},
		{&gateway.Error{Class: gateway.ErrOutcomeUnknown, StatusCode: 500, Code: "X", Err: errors.New("read answer: EOF")}, false},
	} {
		assert.Equal(t, c.want, activities.AnsweredInFull(c.err), "%v", c.err)
	}
}
