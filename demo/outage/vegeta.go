package outage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/workflows"
)

// vegetaAttack (--via vegeta; docs/decisions/025) is `vegeta attack` placing the run's orders through the
// API, paced by vegeta itself (-rate) from a targets file of one POST per
// order. Its results (`vegeta encode --to json`) are matched back to the
// orders by the target URL's fragment, #orderId, which vegeta keeps in
// each result and never sends.
type vegetaAttack struct {
	targets, results string // files in the demo's out folder
	mu               sync.Mutex
	byOrder          map[string]vegetaResult
	arrived          chan struct{} // closed, and replaced, on each result
	done             chan struct{} // closed when vegeta has exited
	err              error         // why vegeta failed, once done
}

// vegetaResult is the part of vegeta's JSON result the demo reads.
type vegetaResult struct {
	Code      int           `json:"code"`
	Timestamp time.Time     `json:"timestamp"`
	Latency   time.Duration `json:"latency"`
	Error     string        `json:"error"`
	Body      []byte        `json:"body"`
	URL       string        `json:"url"`
}

// startVegeta writes the targets of ins and starts the attack on the API
// at baseURL at rate orders per second.
func startVegeta(ctx context.Context, bin, out, baseURL string, rate float64, ins []workflows.PaymentInput) (*vegetaAttack, error) {
	v := &vegetaAttack{targets: filepath.Join(out, "vegeta-targets.json"), results: filepath.Join(out, "vegeta-results.json"),
		byOrder: map[string]vegetaResult{}, arrived: make(chan struct{}), done: make(chan struct{})}
	var lines bytes.Buffer
	for _, in := range ins {
		body, header := httpapi.PlaceRequest(in, "")
		raw, _ := json.Marshal(map[string]any{"method": "POST", "url": orderTargetURL(baseURL, in.OrderID), "body": body, "header": header})
		lines.Write(append(raw, '\n'))
	}
	if err := os.WriteFile(v.targets, lines.Bytes(), 0o644); err != nil {
		return nil, err
	}
	path := filepath.Join(bin, "vegeta")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("vegeta not found at %s (run `make vegeta`): %w", path, err)
	}
	logFile, err := os.Create(filepath.Join(out, "vegeta.log"))
	if err != nil {
		return nil, err
	}
	// -lazy reads one target per hit, so the attack ends at the file's end:
	// one request per order, none repeated.
	attack := exec.CommandContext(ctx, path, "attack", "-format=json", "-lazy", "-targets="+v.targets, "-name=payguard-demo",
		"-rate="+strconv.FormatFloat(rate*1000, 'f', 0, 64)+"/1000s", "-duration=0", "-timeout=30s")
	encode := exec.CommandContext(ctx, path, "encode", "--to", "json")
	attack.Stderr, encode.Stderr = logFile, logFile
	if encode.Stdin, err = attack.StdoutPipe(); err != nil {
		return nil, err
	}
	encoded, err := encode.StdoutPipe()
	if err != nil {
		return nil, err
	}
	resultsFile, err := os.Create(v.results)
	if err != nil {
		return nil, err
	}
	if err := attack.Start(); err != nil {
		return nil, err
	}
	if err := encode.Start(); err != nil {
		_ = attack.Process.Kill()
		return nil, err
	}
	go func() {
		defer close(v.done)
		defer logFile.Close()
		defer resultsFile.Close()
		sc := bufio.NewScanner(encoded)
		sc.Buffer(make([]byte, 0, 64*1024), 4*httpapi.MaxBodyBytes)
		for sc.Scan() {
			var r vegetaResult
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.URL == "" {
				continue // the end of the targets, a hit of its own
			}
			_, _ = resultsFile.Write(append(sc.Bytes(), '\n'))
			v.mu.Lock()
			v.byOrder[orderOfTarget(r.URL)] = r
			close(v.arrived)
			v.arrived = make(chan struct{})
			v.mu.Unlock()
		}
		v.err = errors.Join(sc.Err(), attack.Wait(), encode.Wait())
	}()
	return v, nil
}

func orderTargetURL(baseURL, orderID string) string { return baseURL + "/api/v1/orders#" + orderID }

func orderOfTarget(url string) string {
	if i := strings.LastIndexByte(url, '#'); i >= 0 {
		return url[i+1:]
	}
	return ""
}

// place is loadgen's Place: it waits for vegeta's answer to the order and
// judges it as the API's client would.
func (v *vegetaAttack) place(ctx context.Context, in workflows.PaymentInput) error {
	for {
		v.mu.Lock()
		r, ok := v.byOrder[in.OrderID]
		arrived := v.arrived
		v.mu.Unlock()
		if ok {
			if r.Code == 0 {
				return fmt.Errorf("POST /api/v1/orders: %s", r.Error)
			}
			return httpapi.Placed(r.Code, r.Body)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-v.done:
			return fmt.Errorf("vegeta sent no request for order %s: %v", in.OrderID, v.err)
		case <-arrived:
		}
	}
}

// retime makes vegeta's clock the orders' first answer: when it sent
// each request and how long the answer took.
func (v *vegetaAttack) retime(sum *loadgen.Summary) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range sum.Orders {
		o := &sum.Orders[i]
		if r, ok := v.byOrder[o.OrderID]; ok {
			o.StartOffset = r.Timestamp.Sub(sum.BeganAt).Seconds()
			o.StartMillis = float64(r.Latency) / float64(time.Millisecond)
		}
	}
}

// VegetaSummary is the load client's own view of the run.
type VegetaSummary struct {
	Requests int `json:"requests"`
	// Failed are requests not answered as a placed order (http_req_failed).
	Failed      int            `json:"failed"`
	StatusCodes map[string]int `json:"statusCodes"`
	// PendingWhileOpen are orders placed while the breaker was not CLOSED
	// and answered as the article's "payment being confirmed (PENDING)":
	// accepted, stock held, payment not yet decided (REQUESTING, PENDING).
	PendingWhileOpen int `json:"pendingAnswersWhileOpen"`
	// Report is `vegeta report` on the run's results.
	Report string `json:"report"`
}

// summary waits for vegeta to exit and sums its results up, with
// `vegeta report`'s text.
func (v *vegetaAttack) summary(ctx context.Context, bin string, sum loadgen.Summary) (VegetaSummary, error) {
	select {
	case <-v.done:
	case <-ctx.Done():
		return VegetaSummary{}, ctx.Err()
	}
	if v.err != nil {
		return VegetaSummary{}, fmt.Errorf("vegeta: %w", v.err)
	}
	s := VegetaSummary{StatusCodes: map[string]int{}}
	v.mu.Lock()
	for _, o := range sum.Orders {
		r, ok := v.byOrder[o.OrderID]
		if !ok {
			continue
		}
		s.Requests++
		s.StatusCodes[strconv.Itoa(r.Code)]++
		if r.Code == 0 || httpapi.Placed(r.Code, r.Body) != nil {
			s.Failed++
			continue
		}
		var a httpapi.OrderAnswer
		if json.Unmarshal(r.Body, &a) == nil && a.Status != "" && !a.Status.Final() && o.BreakerAtFire != "closed" {
			s.PendingWhileOpen++
		}
	}
	v.mu.Unlock()
	report, err := exec.CommandContext(ctx, filepath.Join(bin, "vegeta"), "report", v.results).CombinedOutput()
	if err != nil {
		return s, fmt.Errorf("vegeta report: %w: %s", err, report)
	}
	s.Report = string(report)
	return s, nil
}
