package payguard_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/worker/service"
)

// No Docker engine runs where the tests run, so docker-compose.yml and the
// Dockerfile are checked against the code instead: the names, ports, flags
// and targets they use must be the ones the programs read.

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string                            `yaml:"image"`
	Build       *struct{ Context, Target string } `yaml:"build"`
	Entrypoint  []string                          `yaml:"entrypoint"`
	Command     []string                          `yaml:"command"`
	Volumes     []string                          `yaml:"volumes"`
	Environment map[string]string                 `yaml:"environment"`
	Ports       []string                          `yaml:"ports"`
	Profiles    []string                          `yaml:"profiles"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// oneShots are the services others wait for to complete
// (service_completed_successfully): setup steps, which exit when done.
func (c composeFile) oneShots() map[string]bool {
	out := map[string]bool{}
	for _, s := range c.Services {
		for dep, d := range s.DependsOn {
			if d.Condition == "service_completed_successfully" {
				out[dep] = true
			}
		}
	}
	return out
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(raw, &c))
	return c
}

// dockerStages returns the Dockerfile's stage names and base images.
func dockerStages(t *testing.T) (stages map[string]bool, bases []string) {
	t.Helper()
	f, err := os.Open("Dockerfile")
	require.NoError(t, err)
	defer f.Close()
	stages = map[string]bool{}
	from := regexp.MustCompile(`(?i)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := from.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			if !stages[m[1]] {
				bases = append(bases, m[1])
			}
			if m[2] != "" {
				stages[m[2]] = true
			}
		}
	}
	require.NoError(t, sc.Err())
	return stages, bases
}

// readEnv records the environment variables a program asks for.
type readEnv struct {
	values map[string]string
	asked  map[string]bool
}

func newReadEnv(values map[string]string) *readEnv {
	return &readEnv{values: values, asked: map[string]bool{}}
}

func (r *readEnv) get(k string) string {
	r.asked[k] = true
	return r.values[k]
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func containerPort(t *testing.T, mapping string) string {
	parts := strings.Split(mapping, ":")
	require.Len(t, parts, 3, "ports are published as 127.0.0.1:host:container: %s", mapping)
	assert.Equal(t, "127.0.0.1", parts[0], "published on loopback only: %s", mapping)
	return parts[2]
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// composeVar is compose's interpolation: ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?message} and ${VAR?message}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate substitutes a compose value from the host environment as
// docker compose does; a required variable that is unset is an error, as it
// is for compose. A form it does not know fails the test's caller.
func interpolate(value string, host map[string]string) (string, error) {
	var missing error
	out := composeVar.ReplaceAllStringFunc(value, func(m string) string {
		g := composeVar.FindStringSubmatch(m)
		v, set := host[g[1]]
		absent := !set || (strings.HasPrefix(g[2], ":") && v == "")
		switch strings.TrimPrefix(g[2], ":") {
		case "-":
			if absent {
				return g[3]
			}
		case "?":
			if absent {
				missing = fmt.Errorf("required variable %s is missing: %s", g[1], g[3])
			}
		}
		return v
	})
	if strings.Contains(out, "$") {
		return "", fmt.Errorf("%q: an interpolation this test does not read", value)
	}
	return out, missing
}

// hostSecret is the environment compose runs in for these tests.
var hostSecret = map[string]string{"GATEWAY_SECRET": "compose-test-secret", codec.KeysEnv: codec.NewKey("compose-test"),
	httpapi.TokenEnv: "compose-test-api-token-0123456789abcdef"}

// serviceEnv is a service's environment as compose hands it over from host.
func serviceEnv(t *testing.T, s composeService, host map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, raw := range s.Environment {
		v, err := interpolate(raw, host)
		require.NoError(t, err, "%s=%s", k, raw)
		env[k] = v
	}
	return env
}

func portOf(t *testing.T, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	return port
}

func TestComposeMatchesTheCode(t *testing.T) {
	c := loadCompose(t)
	stages, bases := dockerStages(t)
	for _, name := range []string{"postgres", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "pgsim", "worker", "api", "starter"} {
		require.Contains(t, c.Services, name)
	}

	t.Run("images pinned and build targets exist", func(t *testing.T) {
		for name, s := range c.Services {
			if s.Build != nil {
				assert.True(t, stages[s.Build.Target], "%s builds Dockerfile target %q, which does not exist", name, s.Build.Target)
				continue
			}
			assert.Regexp(t, `^[^:]+:[^:]+$`, s.Image, "%s: image pinned to a version", name)
			assert.NotContains(t, s.Image, ":latest", name)
		}
		for _, b := range bases {
			if stages[b] {
				continue
			}
			assert.Regexp(t, `^[^:]+:[0-9][^:]*$`, b, "Dockerfile base image %s pinned to a version", b)
		}
	})

	t.Run("healthchecks", func(t *testing.T) {
		oneShots := c.oneShots()
		for name, s := range c.Services {
			if len(s.Profiles) > 0 || oneShots[name] {
				continue // one-off tools, and setup steps others wait to complete
			}
			require.NotNil(t, s.Healthcheck, "%s has a healthcheck", name)
			assert.NotEmpty(t, s.Healthcheck.Test, name)
		}
		assert.Equal(t, "pg_isready", c.Services["postgres"].Healthcheck.Test[1])
		for name, s := range c.Services {
			for dep, d := range s.DependsOn {
				require.Contains(t, c.Services, dep, "%s depends on a service that exists", name)
				if d.Condition == "service_healthy" {
					assert.NotNil(t, c.Services[dep].Healthcheck, "%s waits for %s to be healthy", name, dep)
				}
			}
		}
	})

	t.Run("settings as environment", func(t *testing.T) {
		for _, name := range []string{"worker", "api", "pgsim"} {
			assert.Empty(t, c.Services[name].Command, "%s takes its settings as environment (PAYGUARD_<FLAG>), not arguments", name)
		}
	})

	t.Run("worker", func(t *testing.T) {
		w := c.Services["worker"]
		env := newReadEnv(serviceEnv(t, w, hostSecret))
		cfg, err := service.ParseFlags(w.Command, env.get, io.Discard)
		require.NoError(t, err, "the worker accepts its compose command and environment")
		opts, err := cfg.ClientOptions(slog.New(slog.DiscardHandler)) // reads TEMPORAL_* as the worker does before dialling
		require.NoError(t, err)
		for k := range w.Environment {
			assert.True(t, env.asked[k], "worker environment %s is read by the worker (it reads %v)", k, keys(env.asked))
		}
		defaults, err := service.ParseFlags(nil, func(string) string { return "" }, io.Discard)
		require.NoError(t, err)
		require.Len(t, w.Ports, 1)
		assert.Equal(t, portOf(t, defaults.HTTPAddr), containerPort(t, w.Ports[0]), "the default --http-addr port")
		assert.Equal(t, portOf(t, cfg.HTTPAddr), containerPort(t, w.Ports[0]))
		// The URLs point at the services that serve them.
		for rawURL, want := range map[string]string{cfg.GatewayURL: "pgsim", cfg.CallbackURL: "worker"} {
			u, err := url.Parse(rawURL)
			require.NoError(t, err)
			assert.Equal(t, want, u.Hostname())
		}
		assert.Equal(t, "temporal:7233", opts.HostPort)
		assert.Equal(t, deployment.SetCurrentAlways, cfg.SetCurrent,
			"Temporal's data outlives a rebuilt image: the one build compose runs must take new runs, not wait behind the last one's")
		db, err := url.Parse(cfg.DatabaseURL)
		require.NoError(t, err)
		assert.Equal(t, "postgres", db.Hostname())
		assert.Equal(t, "/"+c.Services["postgres"].Environment["POSTGRES_DB"], db.Path)
		assert.Equal(t, "/callbacks/gateway", mustURL(t, cfg.CallbackURL).Path)
		assert.Equal(t, portOf(t, cfg.HTTPAddr), mustURL(t, cfg.CallbackURL).Port())
	})

	t.Run("api", func(t *testing.T) {
		a := c.Services["api"]
		env := newReadEnv(serviceEnv(t, a, hostSecret))
		cfg, err := httpapi.ParseFlags(a.Command, env.get, io.Discard)
		require.NoError(t, err, "the API accepts its compose command and environment")
		opts, err := cfg.ClientOptions(slog.New(slog.DiscardHandler)) // reads TEMPORAL_* as the API does before dialling
		require.NoError(t, err)
		for k := range a.Environment {
			assert.True(t, env.asked[k], "api environment %s is read by the API (it reads %v)", k, keys(env.asked))
		}
		defaults, err := httpapi.ParseFlags(nil, func(string) string { return "" }, io.Discard)
		require.NoError(t, err)
		require.Len(t, a.Ports, 1)
		assert.Equal(t, portOf(t, defaults.HTTPAddr), containerPort(t, a.Ports[0]), "the default --http-addr port")
		assert.Equal(t, portOf(t, cfg.HTTPAddr), containerPort(t, a.Ports[0]))
		assert.False(t, config.LoopbackOnly(cfg.HTTPAddr), "the API listens beyond loopback in its container: --http-addr %s", cfg.HTTPAddr)
		assert.Equal(t, hostSecret[httpapi.TokenEnv], cfg.Token, "the API takes the host's token")

		// The same Temporal, namespace, task queue, database and key ring
		// as the worker that runs the orders it places.
		w := c.Services["worker"]
		wenv := serviceEnv(t, w, hostSecret)
		wcfg, err := service.ParseFlags(w.Command, func(k string) string { return wenv[k] }, io.Discard)
		require.NoError(t, err)
		wopts, err := wcfg.ClientOptions(slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		assert.Equal(t, wopts.HostPort, opts.HostPort)
		assert.Equal(t, wopts.Namespace, opts.Namespace)
		assert.Equal(t, wcfg.TaskQueue, cfg.TaskQueue)
		assert.Equal(t, wcfg.DatabaseURL, cfg.DatabaseURL)
		assert.Equal(t, wcfg.CodecKeys, cfg.CodecKeys)
		assert.NotEmpty(t, cfg.CodecKeys)
		assert.NotContains(t, a.Environment, "GATEWAY_SECRET", "the API takes no callbacks: it is not given the gateway's secret")

		require.NotNil(t, a.Healthcheck)
		hc := a.Healthcheck.Test
		require.NotEmpty(t, hc)
		health := mustURL(t, hc[len(hc)-1])
		assert.Equal(t, httpapi.HealthPath, health.Path, "the healthcheck calls the API's unauthenticated liveness endpoint")
		assert.Equal(t, "127.0.0.1", health.Hostname())
		assert.Equal(t, portOf(t, cfg.HTTPAddr), health.Port(), "on the port the API listens on in its container")
		for _, dep := range []string{"postgres", "temporal"} {
			assert.Equal(t, "service_healthy", a.DependsOn[dep].Condition, "the API connects to %s as it starts", dep)
		}
	})

	t.Run("pgsim", func(t *testing.T) {
		p := c.Services["pgsim"]
		env := newReadEnv(serviceEnv(t, p, hostSecret))
		cfg, err := simulator.ParseFlags(p.Command, env.get, io.Discard)
		require.NoError(t, err, "pgsim accepts its compose command")
		for k := range p.Environment {
			assert.True(t, env.asked[k], "pgsim environment %s is read by pgsim", k)
		}
		defaults, err := simulator.ParseFlags(nil, func(string) string { return "" }, io.Discard)
		require.NoError(t, err)
		var published []string
		for _, m := range p.Ports {
			published = append(published, containerPort(t, m))
		}
		assert.ElementsMatch(t, []string{portOf(t, defaults.Addr), portOf(t, defaults.AdminAddr)}, published)
		assert.ElementsMatch(t, []string{portOf(t, cfg.Addr), portOf(t, cfg.AdminAddr)}, published)
		assert.Equal(t, c.Services["worker"].Environment["GATEWAY_SECRET"], p.Environment["GATEWAY_SECRET"], "one secret signs and verifies")
		assert.Equal(t, "http://pgsim:"+portOf(t, cfg.Addr), c.Services["worker"].Environment["GATEWAY_URL"])
	})

	t.Run("starter", func(t *testing.T) {
		s := c.Services["starter"]
		env := newReadEnv(nil)
		// The database is unreachable on purpose: only which variables it reads matters.
		values := serviceEnv(t, s, hostSecret)
		values["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/x?connect_timeout=1"
		env.values = values
		_ = cli.Run(context.Background(), []string{"stock", "show", "P1"}, cli.Env{Getenv: env.get, Stdout: io.Discard, Stderr: io.Discard})
		// The Temporal settings are read when a command dials, through the
		// one builder of client options.
		var common config.Common
		common.Register(flag.NewFlagSet("starter", flag.ContinueOnError), env.get)
		_, err := common.ClientOptions(slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		for k := range s.Environment {
			assert.True(t, env.asked[k], "starter environment %s is read by the starter", k)
		}
	})

	t.Run("temporal", func(t *testing.T) { composeTemporal(t, c) })

	t.Run("postgres", func(t *testing.T) {
		p := c.Services["postgres"]
		require.Len(t, p.Ports, 1)
		assert.Equal(t, "5432", containerPort(t, p.Ports[0]))
	})
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// The worker's callback endpoint listens beyond loopback in compose, so the
// public development secret must never be compose's: the secret is required
// from the host, and without it compose refuses to start anything.
func TestComposeRequiresAnExplicitSecret(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"worker", "pgsim", "starter"} {
		raw, ok := c.Services[name].Environment["GATEWAY_SECRET"]
		require.True(t, ok, "%s is given GATEWAY_SECRET", name)
		assert.NotContains(t, raw, gateway.DevSecret, "%s: the public development secret is never compose's", name)
		_, err := interpolate(raw, map[string]string{})
		if assert.Error(t, err, "%s: GATEWAY_SECRET=%s starts without a secret from the host", name, raw) {
			assert.Contains(t, err.Error(), "GATEWAY_SECRET")
		}
		_, err = interpolate(raw, map[string]string{"GATEWAY_SECRET": ""})
		assert.Error(t, err, "%s: an empty secret is no secret", name)
		v, err := interpolate(raw, hostSecret)
		require.NoError(t, err)
		assert.Equal(t, hostSecret["GATEWAY_SECRET"], v, "%s gets the host's secret", name)
	}

	// And were the secret dropped from compose, the worker itself would refuse.
	w := c.Services["worker"]
	env := serviceEnv(t, w, hostSecret)
	delete(env, "GATEWAY_SECRET")
	_, err := service.ParseFlags(w.Command, func(k string) string { return env[k] }, io.Discard)
	assert.Error(t, err, "the worker refuses the development secret on --http-addr %s", flagValue(w.Command, "--http-addr"))
}

// assertFlagPairs checks that a command line written outside Go holds every
// flag and value of the Go definitions, in the same pairs.
func assertFlagPairs(t *testing.T, cmdline string, defs ...[]string) {
	t.Helper()
	for _, def := range defs {
		for i := 0; i+1 < len(def); i += 2 {
			assert.Contains(t, cmdline, def[i]+" "+def[i+1])
		}
	}
}

// scripts/dev-server.sh starts the dev server by hand; it must run it with
// the flags the demo, chaos and the tests use (internal/devserver).
func TestDevServerScriptMatchesTheGoDefinition(t *testing.T) {
	raw, err := os.ReadFile("scripts/dev-server.sh")
	require.NoError(t, err)
	cmdline := strings.Join(strings.Fields(strings.ReplaceAll(string(raw), "\\\n", " ")), " ")
	assertFlagPairs(t, cmdline, devserver.SearchAttributeArgs(), devserver.TuningArgs, devserver.SQLiteArgs)
	assertFlagPairs(t, cmdline, []string{"--ui-codec-endpoint", config.DefaultCodecEndpoint})
}

// The order API listens beyond loopback in compose, where it refuses to
// start without a bearer token: the token is required from the host, as
// the gateway secret is, and compose has no default for it.
func TestComposeRequiresAnAPIToken(t *testing.T) {
	c := loadCompose(t)
	a := c.Services["api"]
	raw, ok := a.Environment[httpapi.TokenEnv]
	require.True(t, ok, "the api is given %s", httpapi.TokenEnv)
	_, err := interpolate(raw, map[string]string{})
	if assert.Error(t, err, "%s=%s starts without a token from the host", httpapi.TokenEnv, raw) {
		assert.Contains(t, err.Error(), httpapi.TokenEnv)
	}
	_, err = interpolate(raw, map[string]string{httpapi.TokenEnv: ""})
	assert.Error(t, err, "an empty token is no token")
	v, err := interpolate(raw, hostSecret)
	require.NoError(t, err)
	assert.Equal(t, hostSecret[httpapi.TokenEnv], v, "the api gets the host's token")

	// And were the token dropped from compose, the API itself would refuse.
	env := serviceEnv(t, a, hostSecret)
	delete(env, httpapi.TokenEnv)
	_, err = httpapi.ParseFlags(a.Command, func(k string) string { return env[k] }, io.Discard)
	assert.Error(t, err, "the API refuses to serve on --http-addr %s without a token", flagValue(a.Command, "--http-addr"))
}

// Every binary a runtime target copies out of the build stage is built there.
func TestDockerfileBuildsEveryTargetsBinary(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	build := regexp.MustCompile(`(?m)^RUN .*go build .*-o /out/ (.*)$`).FindStringSubmatch(string(raw))
	require.NotNil(t, build, "the build stage's go build line")
	built := strings.Fields(build[1])
	copies := regexp.MustCompile(`(?m)^COPY --from=build /out/(\S+) `).FindAllStringSubmatch(string(raw), -1)
	require.NotEmpty(t, copies)
	for _, m := range copies {
		assert.Contains(t, built, "./"+m[1], "the Dockerfile copies /out/%s, which its build stage does not build", m[1])
	}
	stages, _ := dockerStages(t)
	for _, name := range []string{"worker", "pgsim", "starter", "api"} {
		assert.True(t, stages[name], "the Dockerfile has a %s target", name)
	}
}

// compose starts nothing without a codec key from the host: payloads are
// never written in clear.
func TestComposeRequiresACodecKey(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"worker", "api", "starter"} {
		raw, ok := c.Services[name].Environment[codec.KeysEnv]
		require.True(t, ok, "%s is given %s", name, codec.KeysEnv)
		_, err := interpolate(raw, map[string]string{})
		assert.Error(t, err, "%s starts without a key", name)
	}
}

// The observability profile: Prometheus and Grafana start only when asked
// for, every file they mount is in the repository, and Grafana reads the
// dashboard from where its provisioning looks, from the Prometheus service.
func TestComposeObservabilityProfile(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
			Volumes  []string `yaml:"volumes"`
			Ports    []string `yaml:"ports"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	mounts := map[string]string{} // container path -> host path
	for _, name := range []string{"prometheus", "grafana"} {
		s, ok := c.Services[name]
		require.True(t, ok, "compose has %s", name)
		assert.Equal(t, []string{"observability"}, s.Profiles, name)
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			require.GreaterOrEqual(t, len(parts), 2, v)
			_, err := os.Stat(parts[0])
			assert.NoError(t, err, "%s mounts %s, which the repository holds", name, parts[0])
			mounts[parts[1]] = parts[0]
		}
	}
	var ds struct {
		Datasources []struct{ UID, URL string } `yaml:"datasources"`
	}
	b, err := os.ReadFile("ops/grafana/provisioning/datasources/prometheus.yml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &ds))
	require.Len(t, ds.Datasources, 1)
	promPort := containerPort(t, c.Services["prometheus"].Ports[0])
	assert.Equal(t, "http://prometheus:"+promPort, ds.Datasources[0].URL)
	var dash struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	b, err = os.ReadFile("ops/grafana/provisioning/dashboards/payguard.yml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &dash))
	require.Len(t, dash.Providers, 1)
	assert.Equal(t, "./ops/grafana/payguard.json", mounts[dash.Providers[0].Options.Path+"/payguard.json"], "the provider's folder holds the dashboard")
	assert.Equal(t, "./ops/grafana/provisioning", mounts["/etc/grafana/provisioning"])
	panels, err := os.ReadFile("ops/grafana/payguard.json")
	require.NoError(t, err)
	assert.Contains(t, string(panels), `"uid": "`+ds.Datasources[0].UID+`"`, "the panels name the provisioned datasource")
}
