package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// Paths of the codec server on the worker's HTTP port: the Temporal UI's
// remote codec protocol (POST {"payloads":[...]} to <endpoint>/encode or
// <endpoint>/decode), with Endpoint as the UI's codec endpoint path.
const (
	Endpoint   = "/codec"
	EncodePath = Endpoint + "/encode"
	DecodePath = Endpoint + "/decode"
)

// maxBody bounds one request: the UI sends one page of history's payloads.
const maxBody = 8 << 20

// ServerOptions are the codec server's access rules.
type ServerOptions struct {
	// Origins may call it from a browser (CORS): the Temporal UI's origin,
	// e.g. http://127.0.0.1:8233.
	Origins []string
	// Token, when set, must come as "Authorization: Bearer <token>".
	Token string
}

// Handler serves EncodePath and DecodePath with the SDK's own codec HTTP
// handler (the protocol's reference implementation), behind CORS for the
// UI's origin and the optional bearer token. What it decodes is for people
// to read, so card numbers come out masked (displayMask): programs decode
// with the key ring themselves, never through this server.
func (c *Codec) Handler(o ServerOptions) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c, displayMask{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if !slices.Contains(o.Origins, origin) {
				http.Error(w, "origin not allowed to use the codec server", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions { // preflight: no token, by the CORS rules
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if o.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				http.Error(w, "codec server: missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		inner.ServeHTTP(w, r)
	})
}

// Register mounts the codec server on mux.
func (c *Codec) Register(mux *http.ServeMux, o ServerOptions) {
	h := c.Handler(o)
	mux.Handle(EncodePath, h)
	mux.Handle(DecodePath, h)
}
