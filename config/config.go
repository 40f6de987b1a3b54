// Package config holds the settings every payguard process shares (docs/design.md §6):
// flags whose defaults come from the environment, with the same names
// everywhere.
package config

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/gateway"
)

// Defaults of docs/design.md §6.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultTaskQueue       = "payments"
	DefaultDatabaseURL     = "postgres://postgres@127.0.0.1:5432/payguard?sslmode=disable"
	// DefaultTemporalUIAddr is where a local dev server serves its web UI.
	DefaultTemporalUIAddr = "127.0.0.1:8233"
	// DefaultWorkerAddr is the worker's --http-addr: callbacks, health, metrics.
	DefaultWorkerAddr = "127.0.0.1:8081"
	// DefaultPgsimAddr and DefaultPgsimAdminAddr are pgsim's --addr and --admin-addr.
	DefaultPgsimAddr      = "127.0.0.1:8090"
	DefaultPgsimAdminAddr = "127.0.0.1:8091"
	DefaultGatewayURL     = "http://" + DefaultPgsimAddr
	DefaultCallbackURL    = "http://" + DefaultWorkerAddr + "/callbacks/gateway"
	DefaultMetricsURL     = "http://" + DefaultWorkerAddr + "/metrics"
	// DefaultCodecEndpoint is the worker's codec server, as the local
	// Temporal UI is told to call it (--ui-codec-endpoint).
	DefaultCodecEndpoint = "http://" + DefaultWorkerAddr + codec.Endpoint
	// DefaultCodecOrigins are the local Temporal UI's origins, the browser
	// pages the codec server answers by default.
	DefaultCodecOrigins = "http://" + DefaultTemporalUIAddr + ",http://localhost:8233"
)

// Common are the settings shared by the worker and the starter.
type Common struct {
	// TemporalAddress and Namespace, when set (the flags, defaulting from
	// TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE), win over the client config
	// profile (ClientOptions).
	TemporalAddress string
	Namespace       string
	// CodecKeys is the payload codec's key ring inline (PAYGUARD_CODEC_KEYS,
	// environment only: a key stays out of argv); it wins over CodecKeyFile.
	CodecKeys     string
	CodecKeyFile  string
	TaskQueue     string
	DatabaseURL   string
	GatewayURL    string
	GatewaySecret string
	CallbackURL   string
	// getenv is the environment ClientOptions reads the Temporal client
	// settings from (nil: none, as for a Common built in code).
	getenv func(string) string
}

// ReconcileScheduleID is the id of the sweep's Temporal Schedule: the
// worker's task queue's own, so that fleets on other task queues of one
// namespace (the tests' stacks) each sweep their own database.
func ReconcileScheduleID(taskQueue string) string {
	if taskQueue == DefaultTaskQueue {
		return "payguard-reconcile"
	}
	return "payguard-reconcile-" + taskQueue
}

// Env returns getenv(key), or fallback when it is empty.
func Env(getenv func(string) string, key, fallback string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return fallback
}

// GatewaySecret is the callback signing secret from GATEWAY_SECRET, or the
// public development secret when it is unset: the one source for the worker,
// the starter and pgsim, so what pgsim signs with the worker verifies.
func GatewaySecret(getenv func(string) string) string {
	return Env(getenv, "GATEWAY_SECRET", gateway.DevSecret)
}

// Register adds the shared flags to fs, defaulting from the environment.
func (c *Common) Register(fs *flag.FlagSet, getenv func(string) string) {
	c.getenv = getenv
	c.CodecKeys = getenv(codec.KeysEnv)
	fs.StringVar(&c.TemporalAddress, "temporal-address", getenv("TEMPORAL_ADDRESS"), "Temporal frontend host:port (default: env TEMPORAL_ADDRESS, else the client config profile's, else "+DefaultTemporalAddress+")")
	fs.StringVar(&c.Namespace, "temporal-namespace", getenv("TEMPORAL_NAMESPACE"), "Temporal namespace (default: env TEMPORAL_NAMESPACE, else the client config profile's, else "+DefaultNamespace+")")
	fs.StringVar(&c.CodecKeyFile, "codec-key-file", Env(getenv, codec.KeyFileEnv, codec.DevKeyFile),
		"payload codec key ring file, lines id:base64-key, the first encrypts (env "+codec.KeyFileEnv+"; env "+codec.KeysEnv+" holds the ring inline and wins)")
	fs.StringVar(&c.TaskQueue, "task-queue", Env(getenv, "TASK_QUEUE", DefaultTaskQueue), "task queue (env TASK_QUEUE)")
	fs.StringVar(&c.DatabaseURL, "database-url", Env(getenv, "DATABASE_URL", DefaultDatabaseURL), "PostgreSQL URL (env DATABASE_URL)")
	fs.StringVar(&c.GatewayURL, "gateway-url", Env(getenv, "GATEWAY_URL", DefaultGatewayURL), "payment gateway base URL (env GATEWAY_URL)")
	fs.StringVar(&c.GatewaySecret, "gateway-secret", GatewaySecret(getenv), "callback signing secret (env GATEWAY_SECRET; unset, the public development secret, which the worker takes only on a loopback --http-addr)")
	fs.StringVar(&c.CallbackURL, "callback-url", Env(getenv, "CALLBACK_URL", DefaultCallbackURL), "where the gateway calls back (env CALLBACK_URL)")
}

// Validate checks the shared settings.
func (c *Common) Validate() error {
	var problems []string
	if c.TaskQueue == "" {
		problems = append(problems, "task queue is empty")
	}
	for name, raw := range map[string]string{"gateway url": c.GatewayURL, "callback url": c.CallbackURL} {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("%s %q is not an http(s) URL", name, raw))
		}
	}
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		problems = append(problems, fmt.Sprintf("database url %q is not a postgres:// URL", MaskURL(c.DatabaseURL)))
	}
	if c.GatewaySecret == "" {
		problems = append(problems, "gateway secret is empty")
	}
	if len(problems) > 0 {
		return fmt.Errorf("configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}

// CheckSecretFor refuses the public development secret for a process whose
// callback endpoint listens on listenAddr beyond loopback: anyone who reaches
// the endpoint could sign a callback with it and confirm an unpaid order.
func (c *Common) CheckSecretFor(listenAddr string) error {
	if c.GatewaySecret != gateway.DevSecret || LoopbackOnly(listenAddr) {
		return nil
	}
	return fmt.Errorf("configuration: the gateway secret is the public development one (GATEWAY_SECRET unset, or set to it), "+
		"which only a callback endpoint on loopback may use, and %q is not loopback: set GATEWAY_SECRET (or --gateway-secret) "+
		"to a random secret the gateway shares, e.g. openssl rand -hex 32", listenAddr)
}

// LoopbackOnly reports whether a listen address (host:port) takes
// connections from this machine only. An empty host listens everywhere, and
// a name other than localhost may resolve anywhere.
func LoopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MaskURL hides a URL's password.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// MaskSecret shows only whether a secret is set, and whether it is the
// development default.
func MaskSecret(s string) string {
	switch s {
	case "":
		return "(empty)"
	case gateway.DevSecret:
		return "(development default)"
	}
	return "****"
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
