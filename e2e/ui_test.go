package e2e_test

import (
	"context"
	"encoding/base64"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// artifactDir is where the UI screenshots go (PAYGUARD_ARTIFACTS, or
// artifacts/ui at the module root).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("PAYGUARD_ARTIFACTS")
	if dir == "" {
		root, err := devserver.ModuleRoot()
		require.NoError(t, err)
		dir = filepath.Join(root, "artifacts", "ui")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func chromium(t *testing.T) string {
	testenv.NeedsServices(t, "Chromium")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: `make chromium` installs Debian's package")
	return ""
}

// The Temporal UI, in a real browser: the orders are listed, the
// OrderStatus search attribute filters them, and an order's page tells its
// story (activity summaries, the callback signal).
func TestTemporalUIShowsTheOrders(t *testing.T) {
	t.Parallel()
	// The worker's codec server answers the browser page of this UI.
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.CodecOrigins = []string{testenv.TemporalUIURL(t)} })
	setStock(t, s, "P1", 10)
	ctx := context.Background()
	resolve := func(orderID, st string) {
		o := waitOrder(t, s, orderID, status.OrderPending, 30*time.Second)
		testenv.Resolve(t, s.Sim, o.TransactionKey, st, "", true)
	}
	placeOrder(t, s, "ui-ok-1", "P1", 2)
	placeOrder(t, s, "ui-failed", "P1", 1)
	placeOrder(t, s, "ui-late", "P1", 1, "--deadline", "2s")
	resolve("ui-ok-1", "SUCCESS")
	resolve("ui-failed", "FAILED")
	waitOrder(t, s, "ui-ok-1", status.OrderConfirmed, 30*time.Second)
	waitOrder(t, s, "ui-failed", status.OrderFailed, 30*time.Second)
	waitOrder(t, s, "ui-late", status.OrderCancelled, 30*time.Second)
	run, err := testenv.Temporal(t).DescribeWorkflow(ctx, workflows.PaymentWorkflowID("ui-ok-1"), "")
	require.NoError(t, err)
	runID := run.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	browser, cancelTimeout := context.WithTimeout(browser, 2*time.Minute)
	defer cancelTimeout()

	ui := testenv.TemporalUIURL(t)
	dir := artifactDir(t)
	// page opens a URL, waits until its text contains every want, and saves a screenshot.
	page := func(name, address string, want ...string) string {
		t.Helper()
		require.NoError(t, chromedp.Do(browser, chromedp.Navigate(address)))
		var text string
		deadline := time.Now().Add(60 * time.Second)
		for {
			var err error
			text, err = chromedp.Run(browser, chromedp.Text(chromedp.CSS("body")))
			require.NoError(t, err)
			missing := ""
			for _, w := range want {
				if !strings.Contains(text, w) {
					missing = w
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				if shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, name+"-failed.png"), shot, 0o644)
				}
				t.Fatalf("%s: %q never appeared on %s; page text: %.2000s", name, missing, address, text)
			}
			time.Sleep(300 * time.Millisecond) // the single-page app renders as data arrives
		}
		shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644))
		return text
	}

	list := page("workflows", ui+"/namespaces/default/workflows", "order-ui-ok", "order-ui-failed", "order-ui-late")
	assert.Contains(t, list, workflows.PaymentWorkflowName)

	filtered := page("filter-confirmed", ui+"/namespaces/default/workflows?query="+url.QueryEscape(`OrderStatus="CONFIRMED"`), "order-ui-ok")
	assert.NotContains(t, filtered, "order-ui-failed", "the filter leaves out other statuses")
	assert.NotContains(t, filtered, "order-ui-late")
	cancelled := page("filter-cancelled", ui+"/namespaces/default/workflows?query="+url.QueryEscape(`OrderStatus="CANCELLED"`), "order-ui-late")
	assert.NotContains(t, cancelled, "order-ui-ok")

	// Without a codec endpoint the UI has only what Temporal stores:
	// ciphertext, so neither the card nor the order's story shows.
	orderPage := ui + "/namespaces/default/workflows/" + workflows.PaymentWorkflowID("ui-ok-1") + "/" + runID + "/history"
	// The UI prints payload metadata in base64: "binary/encrypted".
	sealed := page("order-encrypted", orderPage, "gateway-callback", base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted)))
	assert.NotContains(t, sealed, "9814-1451", "no card number without the codec")
	assert.NotContains(t, sealed, "Reserve 2 × P1", "summaries are encrypted too")

	// With the worker's codec server as the UI's codec endpoint (set in the
	// browser, as the UI's codec settings do; the demo and scripts give it
	// to the dev server with --ui-codec-endpoint) the page decodes: the
	// story, and the input with the card masked by the codec server.
	_, err = chromedp.Run(browser, chromedp.Evaluate[bool](`localStorage.setItem("endpoint", JSON.stringify("http://`+s.Worker.Addr()+codec.Endpoint+`")), true`))
	require.NoError(t, err)
	story := page("order", orderPage, "Order ui-ok-1: 2 × P1 for 5000", "gateway-callback", "Charge 5000 for order ui-ok", "****1451")
	assert.Contains(t, story, "Reserve 2 × P1 for order ui-ok-1 (amount 5000)")
	assert.NotContains(t, story, "9814-1451", "the card shows masked, never in full")
}
