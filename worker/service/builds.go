package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/worker/metrics"
)

// pinnedRunsEvery is how often a worker asks Temporal about its
// deployment for /metrics. The asking is done in the background: a scrape
// reads the last answer and never waits for Temporal (an HTTP write
// timeout may be shorter than a describe).
const pinnedRunsEvery = 15 * time.Second

// buildCollector exports the worker's own build (metrics.WorkerBuild) and,
// per build of its deployment, the runs pinned to it still open
// (metrics.PinnedRunsOpen), read with deployment.Describe, as `starter
// deployment describe` does. Every worker exports the fleet's counts, so a
// build whose workers are all gone still has its runs counted by the
// others; the alert compares the two (ops/prometheus/alerts.yml).
type buildCollector struct {
	temporal   client.Client
	deployment string
	buildID    string
	log        *slog.Logger

	own, pinned *prometheus.Desc

	mu   sync.Mutex
	last []deployment.BuildStatus
}

func newBuildCollector(cl client.Client, cfg Config, logger *slog.Logger) *buildCollector {
	return &buildCollector{temporal: cl, deployment: cfg.deploymentName(), buildID: cfg.buildID(), log: logger,
		own: prometheus.NewDesc(metrics.WorkerBuild,
			"1, labelled with the Worker Deployment and the build this worker polls as.", []string{"deployment", "build_id"}, nil),
		pinned: prometheus.NewDesc(metrics.PinnedRunsOpen,
			"Open runs pinned to each build of this worker's deployment (a visibility count, as `starter deployment describe` shows).",
			[]string{"deployment", "build_id"}, nil),
	}
}

func (c *buildCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.own; ch <- c.pinned }

func (c *buildCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.own, prometheus.GaugeValue, 1, c.deployment, c.buildID)
	c.mu.Lock()
	builds := c.last
	c.mu.Unlock()
	for _, b := range builds {
		ch <- prometheus.MustNewConstMetric(c.pinned, prometheus.GaugeValue, float64(b.RunningPinned), c.deployment, b.BuildID)
	}
}

// run reads the deployment now and every pinnedRunsEvery until ctx ends.
// A read that fails exports no count until one succeeds: none is better
// than a stale one (the alert then holds its state rather than firing on
// old news).
func (c *buildCollector) run(ctx context.Context) {
	tick := time.NewTicker(pinnedRunsEvery)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := deployment.Describe(rctx, c.temporal, c.deployment, 0)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("pinned runs not counted for /metrics", "deployment", c.deployment, "error", err.Error())
		}
		c.mu.Lock()
		c.last = st.Builds
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
