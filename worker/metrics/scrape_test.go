package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func serve(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestScrape(t *testing.T) {
	url := serve(t, `# HELP x help
# TYPE payguard_breaker_transitions_total counter
payguard_breaker_transitions_total{breaker="gateway-lookup",from="closed",to="open"} 2
payguard_breaker_transitions_total{breaker="gateway-lookup",from="open",to="half-open"} 1
# TYPE payguard_lookup_duration_seconds histogram
payguard_lookup_duration_seconds_bucket{endpoint="lookup",outcome="ok",le="0.005"} 1
payguard_lookup_duration_seconds_bucket{endpoint="lookup",outcome="ok",le="+Inf"} 3
payguard_lookup_duration_seconds_sum{endpoint="lookup",outcome="ok"} 0.5
payguard_lookup_duration_seconds_count{endpoint="lookup",outcome="ok"} 3
# TYPE payguard_build_info gauge
payguard_build_info{version="v1.2.3, \"rc\"",revision="abc",go="go1.26"} 1
go_goroutines 42
`)
	got, err := Scrape(context.Background(), url, "payguard_breaker_transitions_total", "go_goroutines",
		"payguard_lookup_duration_seconds_bucket", "payguard_lookup_duration_seconds_sum", "payguard_build_info")
	require.NoError(t, err)
	byName := map[string][]Sample{}
	for _, s := range got {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["payguard_breaker_transitions_total"], 2)
	assert.Equal(t, Sample{Name: "payguard_breaker_transitions_total", Labels: map[string]string{"breaker": "gateway-lookup", "from": "closed", "to": "open"}, Value: 2},
		byName["payguard_breaker_transitions_total"][0])
	assert.Equal(t, "half-open", byName["payguard_breaker_transitions_total"][1].Labels["to"])
	assert.Equal(t, []Sample{{Name: "go_goroutines", Labels: map[string]string{}, Value: 42}}, byName["go_goroutines"])
	// A label value with a comma and a quote, which a hand parser splits.
	assert.Equal(t, []Sample{{Name: "payguard_build_info", Labels: map[string]string{"version": `v1.2.3, "rc"`, "revision": "abc", "go": "go1.26"}, Value: 1}},
		byName["payguard_build_info"])
	// A histogram's series as the text format names them.
	assert.Equal(t, []Sample{
		{Name: "payguard_lookup_duration_seconds_bucket", Labels: map[string]string{"endpoint": "lookup", "outcome": "ok", "le": "0.005"}, Value: 1},
		{Name: "payguard_lookup_duration_seconds_bucket", Labels: map[string]string{"endpoint": "lookup", "outcome": "ok", "le": "+Inf"}, Value: 3},
	}, byName["payguard_lookup_duration_seconds_bucket"])
	assert.Equal(t, []Sample{{Name: "payguard_lookup_duration_seconds_sum", Labels: map[string]string{"endpoint": "lookup", "outcome": "ok"}, Value: 0.5}},
		byName["payguard_lookup_duration_seconds_sum"])
	assert.Empty(t, byName["payguard_lookup_duration_seconds_count"], "not asked for")

	_, err = Scrape(context.Background(), "http://127.0.0.1:1/metrics", "x")
	assert.Error(t, err)
}

// A malformed exposition is refused whole, as Prometheus refuses it (the
// hand parser before expfmt skipped the lines it could not read).
func TestScrapeRefusesAMalformedExposition(t *testing.T) {
	url := serve(t, "go_goroutines 42\nbroken{line 1\n")
	_, err := Scrape(context.Background(), url, "go_goroutines")
	assert.Error(t, err)
}
