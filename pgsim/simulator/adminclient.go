package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// AdminCall is one JSON call to a running pgsim's admin API (adminURL is
// its base, e.g. http://127.0.0.1:8091): body, when not nil, is sent as
// JSON, and the answer's data (the gateway's envelope) is decoded into
// out, when not nil. Chaos and the benchmark drive pgsim through it.
func AdminCall(ctx context.Context, method, adminURL, path string, body, out any) error {
	var r *bytes.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(raw)
	} else {
		r = bytes.NewReader(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := adminURL + path
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: HTTP %d %s", method, url, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	if out != nil {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			return fmt.Errorf("%s %s: %w", method, url, err)
		}
		return json.Unmarshal(env.Data, out)
	}
	return nil
}

// PatchFaults changes a running pgsim's faults (admin PATCH /admin/faults):
// patch holds only the fields to change, by their JSON names.
func PatchFaults(ctx context.Context, adminURL string, patch map[string]any) error {
	return AdminCall(ctx, http.MethodPatch, adminURL, "/admin/faults", patch, nil)
}
