package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/api/httpapi"
)

// spec is docs/openapi.yaml, loaded and checked once.
var spec = sync.OnceValues(func() (routers.Router, error) {
	_, here, _, _ := runtime.Caller(0)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(filepath.Dir(here), "..", "..", "docs", "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	doc.Servers = openapi3.Servers{{URL: "/"}} // any host: the tests' ports are free ones
	return gorillamux.NewRouter(doc)
})

// client calls one API and holds every request and answer to
// docs/openapi.yaml: an answer always, a request unless the test sends a
// bad one on purpose.
type client struct {
	t     *testing.T
	base  string
	token string
}

func newClient(t *testing.T, api *httpapi.Server) *client {
	return &client{t: t, base: "http://" + api.Addr()}
}

type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "answer %d: %s", r.code, r.body)
}

func (r reply) problem(t *testing.T) httpapi.Problem {
	t.Helper()
	require.Equal(t, httpapi.ProblemContentType, r.header.Get("Content-Type"), "a problem's media type: %s", r.body)
	var p httpapi.Problem
	r.decode(t, &p)
	require.Equal(t, r.code, p.Status, "the problem's status is the answer's")
	return p
}

// do sends method path with body (JSON-encoded unless it is a string or
// nil) and headers, "valid" saying whether the request must meet the spec.
func (c *client) do(method, path string, body any, headers map[string]string, valid bool) reply {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(c.t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
	require.NoError(c.t, err)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	c.check(req, raw, resp, answer, valid)
	return reply{code: resp.StatusCode, header: resp.Header, body: answer}
}

// check validates the exchange against the spec.
func (c *client) check(req *http.Request, raw []byte, resp *http.Response, answer []byte, valid bool) {
	c.t.Helper()
	router, err := spec()
	require.NoError(c.t, err, "docs/openapi.yaml")
	route, params, err := router.FindRoute(req)
	if (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) && err != nil {
		return // a path or method the API does not serve, answered so
	}
	require.NoError(c.t, err, "%s %s is in docs/openapi.yaml", req.Method, req.URL.Path)
	req.Body = io.NopCloser(bytes.NewReader(raw))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if valid {
		require.NoError(c.t, openapi3filter.ValidateRequest(context.Background(), in), "the request meets docs/openapi.yaml")
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(answer)
	require.NoError(c.t, openapi3filter.ValidateResponse(context.Background(), out),
		"the answer %d %s meets docs/openapi.yaml", resp.StatusCode, strings.TrimSpace(string(answer)))
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
