package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/workflows"
)

// Memory is the worker's memory at one moment, after a forced GC.
type Memory struct {
	RSSMB  float64 `json:"rssMB"`
	HeapMB float64 `json:"heapMB"` // Go heap in use (go_memstats_heap_alloc_bytes)
}

// Capacity is the waiting-orders phase.
type Capacity struct {
	Orders           int     `json:"orders"`
	Waiting          int     `json:"waiting"` // PENDING in the database when measured
	Before           Memory  `json:"before"`
	After            Memory  `json:"after"`
	RSSPer1000MB     float64 `json:"rssPer1000MB"`
	HeapPer1000MB    float64 `json:"heapPer1000MB"`
	HistoryBytes     int64   `json:"waitingHistoryBytes"` // one waiting order's history
	HistoryEvents    int64   `json:"waitingHistoryEvents"`
	ConfirmedBytes   int64   `json:"confirmedHistoryBytes"` // one CONFIRMED order's history
	ConfirmedEvents  int64   `json:"confirmedHistoryEvents"`
	SecondsToWaiting float64 `json:"secondsToWaiting"`
	FailedToStart    int     `json:"failedToStart,omitempty"`
	FirstStartError  string  `json:"firstStartError,omitempty"`
}

// workerMemory forces a GC in the worker (pprof's heap?gc=1) and reads its
// resident set and Go heap from /metrics.
func workerMemory(ctx context.Context, workerAddr string) (Memory, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+workerAddr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return Memory{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Memory{}, err
	}
	resp.Body.Close()
	samples, err := metrics.Scrape(ctx, "http://"+workerAddr+"/metrics", "process_resident_memory_bytes", "go_memstats_heap_alloc_bytes")
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, s := range samples {
		switch s.Name {
		case "process_resident_memory_bytes":
			m.RSSMB = round2(s.Value / 1e6)
		case "go_memstats_heap_alloc_bytes":
			m.HeapMB = round2(s.Value / 1e6)
		}
	}
	return m, nil
}

// runCapacity leaves n orders waiting — pgsim keeps their transactions
// PENDING and drops every callback — and measures what they cost the
// worker and Temporal. confirmedOrder names an order of the rate phase
// for its history size.
func runCapacity(ctx context.Context, cl client.Client, db *pgxpool.Pool, adminURL, workerAddr string, n int, rate float64, confirmedOrder string) (Capacity, error) {
	c := Capacity{Orders: n}
	var err error
	if c.Before, err = workerMemory(ctx, workerAddr); err != nil {
		return c, err
	}
	if err := simulator.PatchFaults(ctx, adminURL, map[string]any{
		"processing": map[string]any{"min": "23h", "max": "23h"}, "callback": map[string]any{"dropRate": 1},
	}); err != nil {
		return c, err
	}
	prefix := loadgen.NewOrderID()
	order := benchOrder(workflows.MaxDeadline)
	began := time.Now()
	started, failed, firstErr := launch(ctx, cl, prefix, order, n, rate)
	c.FailedToStart = failed
	if firstErr != nil {
		c.FirstStartError = firstErr.Error()
	}
	if started == 0 {
		return c, fmt.Errorf("no order of the capacity phase started: %w", firstErr)
	}
	// Waiting means PENDING in the database: the create went out and its
	// answer is awaited. A server too busy to get them all there in time is
	// measured with those that are (Waiting says how many).
	giveUp := time.Now().Add(2*time.Minute + time.Duration(n)*20*time.Millisecond)
	for {
		err := db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE order_id LIKE $1 AND status = $2`,
			prefix+"-%", string(status.OrderPending)).Scan(&c.Waiting)
		if err != nil {
			return c, err
		}
		if c.Waiting >= started || (time.Now().After(giveUp) && c.Waiting > 0) {
			break
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	c.SecondsToWaiting = round2(time.Since(began).Seconds())
	if c.After, err = workerMemory(ctx, workerAddr); err != nil {
		return c, err
	}
	per := 1000 / float64(c.Waiting)
	c.RSSPer1000MB = round2((c.After.RSSMB - c.Before.RSSMB) * per)
	c.HeapPer1000MB = round2((c.After.HeapMB - c.Before.HeapMB) * per)
	var one string
	if err := db.QueryRow(ctx, `SELECT order_id FROM orders WHERE order_id LIKE $1 LIMIT 1`, prefix+"-%").Scan(&one); err != nil {
		return c, err
	}
	if c.HistoryBytes, c.HistoryEvents, err = historySize(ctx, cl, one); err != nil {
		return c, err
	}
	if confirmedOrder != "" {
		c.ConfirmedBytes, c.ConfirmedEvents, err = historySize(ctx, cl, confirmedOrder)
	}
	return c, err
}

// launch starts n orders at rate (their ids as loadgen names them) without
// waiting for them to end, and counts those started and those refused (a
// start that timed out on a busy server may still have started: it is
// then found waiting in the database all the same).
func launch(ctx context.Context, cl client.Client, prefix string, order loadgen.Order, n int, rate float64) (started, failed int, firstErr error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		order.Product = products[i%len(products)]
		in := order.Input(fmt.Sprintf("%s-%05d", prefix, i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := loadgen.StartOrder(ctx, cl, config.DefaultTaskQueue, in)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			started++
		}()
		select {
		case <-ctx.Done():
			wg.Wait()
			return started, failed, ctx.Err()
		case <-tick.C:
		}
	}
	wg.Wait()
	return started, failed, firstErr
}

// historySize is an order's Temporal history: bytes and events.
func historySize(ctx context.Context, cl client.Client, orderID string) (int64, int64, error) {
	d, err := cl.DescribeWorkflow(ctx, workflows.PaymentWorkflowID(orderID), "")
	if err != nil {
		return 0, 0, err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	return info.GetHistorySizeBytes(), info.GetHistoryLength(), nil
}

// saveCPUProfile fetches the worker's CPU profile over the next d into
// path (`go tool pprof` reads it).
func saveCPUProfile(ctx context.Context, workerAddr string, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", workerAddr, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
