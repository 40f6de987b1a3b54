package metrics

// A reader of the worker's metrics from outside the process: samples from a
// Prometheus endpoint, enough for the load generator and the demo to follow
// the worker. It lives beside the names it reads; the exposition is parsed
// by Prometheus's own decoder (expfmt), so label values may hold anything
// the format can carry (commas, quotes, newlines).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Sample is one series of the exposition and its value, named as the text
// format writes it: a histogram's series are NAME_bucket (with its le
// label), NAME_sum and NAME_count; a summary's NAME (with quantile),
// NAME_sum and NAME_count.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape fetches url and returns the samples whose series name is one of
// names. An exposition that does not parse is an error, as it is to
// Prometheus.
func Scrape(ctx context.Context, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Sample
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		for _, s := range samples(&mf) {
			if want[s.Name] {
				out = append(out, s)
			}
		}
	}
}

// samples flattens a family into its series, in the order the text format
// lists them.
func samples(mf *dto.MetricFamily) []Sample {
	name := mf.GetName()
	var out []Sample
	for _, m := range mf.GetMetric() {
		labels := func(extra ...string) map[string]string {
			l := make(map[string]string, len(m.GetLabel())+1)
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			for i := 0; i+1 < len(extra); i += 2 {
				l[extra[i]] = extra[i+1]
			}
			return l
		}
		switch {
		case m.Counter != nil:
			out = append(out, Sample{name, labels(), m.GetCounter().GetValue()})
		case m.Gauge != nil:
			out = append(out, Sample{name, labels(), m.GetGauge().GetValue()})
		case m.Untyped != nil:
			out = append(out, Sample{name, labels(), m.GetUntyped().GetValue()})
		case m.Histogram != nil:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				out = append(out, Sample{name + "_bucket", labels("le", formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount())})
			}
			// The text format's +Inf bucket is the count; the decoder keeps it
			// only when it was written, so it is added back when missing.
			if n := len(h.GetBucket()); n == 0 || !math.IsInf(h.GetBucket()[n-1].GetUpperBound(), 1) {
				out = append(out, Sample{name + "_bucket", labels("le", "+Inf"), float64(h.GetSampleCount())})
			}
			out = append(out, Sample{name + "_sum", labels(), h.GetSampleSum()},
				Sample{name + "_count", labels(), float64(h.GetSampleCount())})
		case m.Summary != nil:
			sm := m.GetSummary()
			for _, q := range sm.GetQuantile() {
				out = append(out, Sample{name, labels("quantile", formatFloat(q.GetQuantile())), q.GetValue()})
			}
			out = append(out, Sample{name + "_sum", labels(), sm.GetSampleSum()},
				Sample{name + "_count", labels(), float64(sm.GetSampleCount())})
		}
	}
	return out
}

// formatFloat writes a bound as the text format does: 0.005, +Inf.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
