package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"

	"github.com/payguard/payguard/codec"
)

// ClientOptions builds the options every payguard program dials Temporal
// with, in this order of precedence (docs/design.md §6):
//
//  1. the profile in Temporal's standard client config file
//     (TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml;
//     TEMPORAL_PROFILE, else "default"): address, namespace, API key,
//     TLS client certificate, key and server CA;
//  2. the environment over it (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
//     TEMPORAL_API_KEY, TEMPORAL_TLS_*), read by the SDK's envconfig;
//  3. --temporal-address and --temporal-namespace over both;
//  4. DefaultTemporalAddress and DefaultNamespace where none says.
//
// It adds payguard's payload codec (card data never reaches Temporal in
// clear) and the SDK logger. This is the one place client options are
// built: what every client needs (interceptors, metrics) is added here.
func (c *Common) ClientOptions(logger *slog.Logger) (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: envLookup{c.getenv}})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client config (TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE): %w", err)
	}
	if c.TemporalAddress != "" {
		opts.HostPort = c.TemporalAddress
	}
	if c.Namespace != "" {
		opts.Namespace = c.Namespace
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultTemporalAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	cd, err := c.Codec()
	if err != nil {
		return client.Options{}, err
	}
	opts.DataConverter, opts.FailureConverter = cd.DataConverter(), cd.FailureConverter()
	// Uncompressed: the payloads are ciphertext, which gzip cannot shrink,
	// and gzip cost the worker 7 % of its CPU per order (make bench).
	opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	return opts, nil
}

// Codec is the payload codec of the configured key ring
// (PAYGUARD_CODEC_KEYS, else --codec-key-file).
func (c *Common) Codec() (*codec.Codec, error) {
	keys, err := codec.LoadKeys(c.CodecKeys, c.CodecKeyFile)
	if err != nil {
		return nil, err
	}
	return codec.New(keys)
}

// envLookup shows envconfig the process's environment through getenv (nil
// in a Config built in code: no environment), where an empty variable is
// an unset one, as everywhere else in payguard.
type envLookup struct{ getenv func(string) string }

func (e envLookup) LookupEnv(key string) (string, bool) {
	if e.getenv == nil {
		return "", false
	}
	v := e.getenv(key)
	return v, v != ""
}

// Environ lists the TEMPORAL_GRPC_META_* headers, the only variables
// envconfig enumerates.
func (e envLookup) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if v, ok := e.LookupEnv(name); ok && strings.HasPrefix(name, "TEMPORAL_GRPC_META_") {
			out = append(out, name+"="+v)
		}
	}
	return out
}
