package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/payguard/payguard/internal/process"
)

// Link names: every connection between two services goes through one.
const (
	LinkPostgres = "worker-postgres"
	LinkGateway  = "worker-pgsim"
	LinkTemporal = "worker-temporal"
	// LinkCallbackPrefix + the worker's number is pgsim's way to that worker.
	LinkCallbackPrefix = "pgsim-worker"
)

// Links is the embedded toxiproxy: one proxy per link, faults (toxics)
// added and removed by name.
type Links struct {
	// direct links are no proxies at all: add hands back the upstream
	// (Options.Direct, for measurements a proxy hop would distort).
	direct  bool
	server  *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy
}

func newLinks(direct bool) *Links {
	return &Links{
		direct:  direct,
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
	}
}

// add starts a proxy on a free loopback port to upstream and returns its
// address (the upstream itself when the links are direct).
func (l *Links) add(name, upstream string) (string, error) {
	if l.direct {
		return upstream, nil
	}
	listen, err := process.FreeAddr()
	if err != nil {
		return "", err
	}
	p := toxiproxy.NewProxy(l.server, name, listen, upstream)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("proxy %s: %w", name, err)
	}
	l.mu.Lock()
	l.proxies[name] = p
	l.mu.Unlock()
	return p.Listen, nil
}

// Names lists the links.
func (l *Links) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.proxies))
	for n := range l.proxies {
		out = append(out, n)
	}
	return out
}

// Toxic adds a fault to a link in both directions: kind is a toxiproxy
// toxic type (latency, reset_peer, timeout, bandwidth), id names it so it
// can be removed.
func (l *Links) Toxic(link, id, kind string, attrs map[string]any) error {
	l.mu.Lock()
	p := l.proxies[link]
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no link %q", link)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		raw, err := json.Marshal(map[string]any{"name": id + "-" + stream, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			return err
		}
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("link %s: toxic %s: %w", link, kind, err)
		}
	}
	return nil
}

// Heal removes a fault from a link (a fault already gone is fine).
func (l *Links) Heal(link, id string) {
	l.mu.Lock()
	p := l.proxies[link]
	l.mu.Unlock()
	if p == nil {
		return
	}
	for _, stream := range []string{"upstream", "downstream"} {
		_ = p.Toxics.RemoveToxic(context.Background(), id+"-"+stream)
	}
}

// HealAll removes every fault from every link.
func (l *Links) HealAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.Toxics.ResetToxics(context.Background())
	}
}

func (l *Links) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.Stop()
	}
}
