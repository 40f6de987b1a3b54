package httpapi

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
)

// Defaults of the API's own flags (docs/design.md §12).
const (
	DefaultAddr = "127.0.0.1:8080"
	// DefaultFirstAnswerWait bounds how long POST /api/v1/orders waits for
	// the order's first step (reserved, or rejected) before it answers
	// with the order still RESERVING.
	DefaultFirstAnswerWait = 2 * time.Second
	// TokenEnv holds the bearer token the API requires.
	TokenEnv = "PAYGUARD_API_TOKEN"
	// MinTokenLen keeps a guessable token out: 16 bytes of hex at least.
	MinTokenLen = 32
)

// Config is the API's whole configuration.
type Config struct {
	config.Common
	HTTPAddr string
	// Token is the bearer token every /api/ request must carry; "" asks
	// for none, which only a loopback HTTPAddr may.
	Token           string
	FirstAnswerWait time.Duration
	HTTPTimeouts    config.HTTPTimeouts
	// LogLevel is the least level Run's logger logs (--log-level).
	LogLevel slog.Level
	// Listener, when set (tests), is used instead of listening on HTTPAddr.
	Listener net.Listener
}

// FlagSet is the API's flag set, unparsed (docs/configuration.md is
// generated from it).
func FlagSet(getenv func(string) string) *flag.FlagSet {
	fs, _ := newFlagSet(getenv)
	return fs
}

// ParseFlags reads the API's flags, each from its variable where the
// command line leaves it (config.Parse); usage is where -h and a mistake
// print the usage. A mistake is a usage error (exit 2).
func ParseFlags(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	fs, c := newFlagSet(getenv)
	fs.SetOutput(usage)
	if err := config.Parse(fs, args, getenv); err != nil {
		return Config{}, err
	}
	return *c, exitcode.UsageError(c.Validate())
}

func newFlagSet(getenv func(string) string) (*flag.FlagSet, *Config) {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	c := &Config{HTTPTimeouts: config.DefaultHTTPTimeouts()}
	c.Common.Register(fs, getenv)
	fs.StringVar(&c.HTTPAddr, "http-addr", DefaultAddr, "listen address of the order API, /healthz and /metrics")
	fs.StringVar(&c.Token, "api-token", getenv(TokenEnv), "bearer token every /api/ request must carry (env "+TokenEnv+"); required beyond loopback")
	fs.DurationVar(&c.FirstAnswerWait, "first-answer-wait", DefaultFirstAnswerWait,
		"how long POST /api/v1/orders waits for the order's first step (reserved or rejected) before answering it RESERVING")
	fs.DurationVar(&c.HTTPTimeouts.ReadHeader, "http-read-header-timeout", c.HTTPTimeouts.ReadHeader, "time a client has to send a request's headers")
	fs.DurationVar(&c.HTTPTimeouts.Read, "http-read-timeout", c.HTTPTimeouts.Read, "time a client has to send a whole request, body included")
	config.RegisterLogLevel(fs, &c.LogLevel)
	return fs, c
}

// Validate checks the configuration before anything connects.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.Token == "" && !config.LoopbackOnly(c.listenAddr()) {
		return fmt.Errorf("configuration: the API listens on %q, beyond loopback, without a token: set %s (or --api-token), e.g. openssl rand -hex 32",
			c.listenAddr(), TokenEnv)
	}
	if c.Token != "" && len(c.Token) < MinTokenLen {
		return fmt.Errorf("configuration: the API token is %d characters; at least %d (openssl rand -hex 32)", len(c.Token), MinTokenLen)
	}
	if c.FirstAnswerWait <= 0 {
		return errors.New("configuration: --first-answer-wait must be positive")
	}
	// A POST's answer must leave before the write timeout cuts it off,
	// its order placed: the start, the wait, and a margin for the rest.
	if write := c.HTTPTimeouts.OrDefaults().Write; c.FirstAnswerWait+startTimeout+answerMargin > write {
		return fmt.Errorf("configuration: --first-answer-wait %s leaves no room in the %s write timeout (at most %s)",
			c.FirstAnswerWait, write, write-startTimeout-answerMargin)
	}
	return nil
}

func (c *Config) listenAddr() string {
	if c.Listener != nil {
		return c.Listener.Addr().String()
	}
	return c.HTTPAddr
}
