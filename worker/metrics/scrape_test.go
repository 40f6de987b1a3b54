package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`# HELP x help
# TYPE payguard_breaker_transitions_total counter
payguard_breaker_transitions_total{breaker="gateway-lookup",from="closed",to="open"} 2
payguard_breaker_transitions_total{breaker="gateway-lookup",from="open",to="half-open"} 1
payguard_lookup_duration_seconds_sum{endpoint="lookup",outcome="ok"} 0.5
go_goroutines 42
broken{line 1
`))
	}))
	defer srv.Close()
	got, err := Scrape(context.Background(), srv.URL, "payguard_breaker_transitions_total", "go_goroutines")
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, Sample{Name: "payguard_breaker_transitions_total", Labels: map[string]string{"breaker": "gateway-lookup", "from": "closed", "to": "open"}, Value: 2}, got[0])
	assert.Equal(t, "half-open", got[1].Labels["to"])
	assert.Equal(t, Sample{Name: "go_goroutines", Labels: map[string]string{}, Value: 42}, got[2])

	_, err = Scrape(context.Background(), "http://127.0.0.1:1/metrics", "x")
	assert.Error(t, err)
}
