package metrics

// A reader of the worker's metrics from outside the process: samples from a
// Prometheus text endpoint, enough for the load generator and the demo to
// follow the worker. It lives beside the names it reads.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one line of the exposition: a series and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape fetches url and returns the samples whose metric name is one of
// names.
func Scrape(ctx context.Context, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
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
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if s, ok := parseLine(sc.Text()); ok && want[s.Name] {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// parseLine reads `name{k="v",...} value` or `name value`; comments and
// anything else are skipped. Label values here never hold commas or quotes.
func parseLine(line string) (Sample, bool) {
	if line == "" || strings.HasPrefix(line, "#") {
		return Sample{}, false
	}
	s := Sample{Labels: map[string]string{}}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		s.Name = line[:i]
		labels, after, ok := strings.Cut(line[i+1:], "}")
		if !ok {
			return Sample{}, false
		}
		for _, part := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(part, "="); ok {
				s.Labels[strings.TrimSpace(k)] = strings.Trim(v, `"`)
			}
		}
		rest = strings.TrimSpace(after)
	} else {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			return Sample{}, false
		}
		s.Name, rest = name, value
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return Sample{}, false
	}
	s.Value = v
	return s, true
}
