package payguard_test

import (
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/temporalserver"
)

// composeRoot is where compose mounts the repository's ops/temporal in the
// server's image: temporalserver.Args runs from it as from the module root.
const composeRoot = "/etc/temporal"

// compose's Temporal is the release temporalserver.Version names, run from
// the repository's config as `make temporal-server` runs it, on schema
// set up by the release's own tool and directories, with the namespace and
// search attributes the code registers, and the UI on the address the
// worker's codec server allows.
func composeTemporal(t *testing.T, c composeFile) {
	tag := strings.TrimPrefix(temporalserver.Version, "v")
	tm := c.Services["temporal"]
	assert.Equal(t, "temporalio/server:"+tag, tm.Image)
	assert.Equal(t, append([]string{"temporal-server"}, temporalserver.Args(composeRoot)...), tm.Entrypoint,
		"the server runs from the repository's config, as internal/temporalserver starts it")
	assert.Contains(t, tm.Volumes, "./"+temporalserver.ConfigDir+":"+path.Join(composeRoot, temporalserver.ConfigDir)+":ro")

	env := serviceEnv(t, tm, hostSecret)
	known := map[string]bool{}
	for _, kv := range (temporalserver.Settings{}).Env() {
		known[strings.SplitN(kv, "=", 2)[0]] = true
	}
	for k := range env {
		assert.True(t, known[k], "temporal environment %s is read by ops/temporal/postgres.yaml", k)
	}
	assert.Equal(t, "0.0.0.0", env[temporalserver.BindIPEnv], "beyond loopback in its container, for the other services")
	base, err := strconv.Atoi(env[temporalserver.PortBaseEnv])
	require.NoError(t, err, temporalserver.PortBaseEnv)
	require.Len(t, tm.Ports, 1)
	assert.Equal(t, strconv.Itoa(base), containerPort(t, tm.Ports[0]), "the frontend's gRPC port is published")
	assert.Equal(t, "temporal:"+strconv.Itoa(base), c.Services["worker"].Environment["TEMPORAL_ADDRESS"])
	assert.Equal(t, "postgres:"+containerPort(t, c.Services["postgres"].Ports[0]), env[temporalserver.SQLAddrEnv])
	assert.Equal(t, temporalserver.DefaultDB, env[temporalserver.DBEnv])
	assert.Equal(t, temporalserver.DefaultVisibilityDB, env[temporalserver.VisibilityDBEnv])
	require.NotNil(t, tm.Healthcheck)
	assert.Equal(t, strconv.Itoa(base), tm.Healthcheck.Test[len(tm.Healthcheck.Test)-1], "the healthcheck probes the frontend")

	schema := c.Services["temporal-schema"]
	assert.True(t, strings.HasPrefix(schema.Image, "temporalio/admin-tools:"+tag+"-"), "admin-tools of the same release: %s", schema.Image)
	script := strings.Join(schema.Command, "\n")
	for db, dir := range map[string]string{temporalserver.DefaultDB: temporalserver.SchemaPath, temporalserver.DefaultVisibilityDB: temporalserver.VisibilitySchemaPath} {
		assert.Contains(t, script, "--db "+db+" update-schema -d /etc/temporal/schema/"+dir)
	}
	assert.Equal(t, "postgres12", schema.Environment["SQL_PLUGIN"])
	assert.Equal(t, "service_completed_successfully", tm.DependsOn["temporal-schema"].Condition, "the server starts on set-up databases")

	setup := c.Services["temporal-setup"]
	assert.Equal(t, schema.Image, setup.Image)
	script = strings.Join(setup.Command, "\n")
	assert.Contains(t, script, "namespace create --namespace "+temporalserver.Namespace)
	assert.Equal(t, temporalserver.Namespace, c.Services["worker"].Environment["TEMPORAL_NAMESPACE"])
	for name := range temporalserver.SearchAttributes() {
		assert.Contains(t, script, "--name "+name+" --type Keyword")
	}
	for _, name := range []string{"worker", "api"} {
		assert.Equal(t, "service_completed_successfully", c.Services[name].DependsOn["temporal-setup"].Condition,
			"%s starts once the namespace and search attributes are there", name)
	}

	ui := c.Services["temporal-ui"]
	assert.True(t, strings.HasPrefix(ui.Image, "temporalio/ui:"), ui.Image)
	uiEnv := serviceEnv(t, ui, hostSecret)
	assert.Equal(t, "temporal:"+strconv.Itoa(base), uiEnv["TEMPORAL_ADDRESS"])
	assert.Equal(t, config.DefaultCodecEndpoint, uiEnv["TEMPORAL_CODEC_ENDPOINT"], "the UI decodes through the worker's codec server")
	codecURL := mustURL(t, uiEnv["TEMPORAL_CODEC_ENDPOINT"])
	assert.Equal(t, codec.Endpoint, codecURL.Path)
	assert.Contains(t, c.Services["worker"].Ports, "127.0.0.1:"+codecURL.Port()+":"+portOf(t, c.Services["worker"].Environment[config.EnvName("http-addr")]),
		"on the port the worker's HTTP endpoints are published on")
	require.Len(t, ui.Ports, 1)
	assert.Equal(t, "127.0.0.1:"+portOf(t, config.DefaultTemporalUIAddr)+":"+uiEnv["TEMPORAL_UI_PORT"], ui.Ports[0],
		"the UI on the address the worker's codec server allows (config.DefaultTemporalUIAddr)")
}

// docker-compose (Debian's v1, `make docker-compose`) validates the file
// as compose reads it, engine or none: the schema, the interpolation and
// every depends_on condition.
func TestComposeConfigIsValid(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	require.NoError(t, err, "docker-compose validates docker-compose.yml: `make docker-compose` installs it")
	cmd := exec.Command(bin, "config", "--quiet")
	cmd.Env = os.Environ()
	for k, v := range hostSecret {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "docker-compose config:\n%s", out)

	// And the file compose renders is the one this package reads.
	cmd = exec.Command(bin, "config")
	cmd.Env = append(cmd.Env, os.Environ()...)
	for k, v := range hostSecret {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	rendered, err := cmd.Output()
	require.NoError(t, err)
	var c struct {
		Services map[string]any `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(rendered, &c))
	var names []string
	for name := range c.Services {
		names = append(names, name)
	}
	var ours []string
	for name := range loadCompose(t).Services {
		ours = append(ours, name)
	}
	assert.ElementsMatch(t, ours, names)
}
