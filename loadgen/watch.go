package loadgen

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/payguard/payguard/worker/metrics"
)

// breakerWatch follows payguard_breaker_transitions_total on the worker's
// /metrics and turns each increment into a timed change.
type breakerWatch struct {
	url    string
	began  time.Time
	mu     sync.Mutex
	state  string
	seen   map[string]float64
	list   []BreakerChange
	notify func(BreakerChange)
	worker string // BreakerChange.Worker
}

func (b *breakerWatch) current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *breakerWatch) changes() []BreakerChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.list)
}

func (b *breakerWatch) run(ctx context.Context) {
	if b.url == "" {
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	b.scrape(ctx, true)
	for {
		select {
		case <-ctx.Done():
			b.scrape(context.Background(), false)
			return
		case <-t.C:
			b.scrape(ctx, false)
		}
	}
}

func (b *breakerWatch) scrape(ctx context.Context, baseline bool) {
	counts, err := ScrapeBreakerTransitions(ctx, b.url)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]float64{}
	}
	now := time.Now()
	var fresh []BreakerChange
	for key, n := range counts {
		if !baseline && n > b.seen[key] {
			parts := strings.SplitN(key, "|", 3)
			for range int(n - b.seen[key]) {
				fresh = append(fresh, BreakerChange{At: now, Offset: round(now.Sub(b.began).Seconds()), Breaker: parts[0], From: parts[1], To: parts[2], Worker: b.worker})
			}
		}
		b.seen[key] = n
	}
	// Several changes within one scrape: order them along the state machine.
	sort.SliceStable(fresh, func(i, j int) bool { return fresh[j].From == fresh[i].To })
	for _, c := range fresh {
		b.list = append(b.list, c)
		b.state = c.To
		if b.notify != nil {
			b.notify(c)
		}
	}
}

// ScrapeBreakerTransitions reads the breaker transition counters from a
// Prometheus text endpoint, keyed "breaker|from|to".
func ScrapeBreakerTransitions(ctx context.Context, url string) (map[string]float64, error) {
	samples, err := metrics.Scrape(ctx, url, metrics.BreakerTransitions)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Labels["breaker"]+"|"+s.Labels["from"]+"|"+s.Labels["to"]] = s.Value
	}
	return out, nil
}
