// Package temporalserver holds what payguard's real Temporal server is made
// of, as internal/devserver does for the CLI's dev server: the server
// version the Makefile builds, the config it runs from (ops/temporal), the
// environment that config reads and its defaults, the databases it keeps on
// PostgreSQL (set up with temporal-sql-tool from the server module's own
// schema directory, schema.go) and the process that runs it, with the
// namespace created and payguard's search attributes registered
// (server.go). The demo, chaos, the bench and the tests (PAYGUARD_TEMPORAL=
// server) start it from here; `make temporal-server` runs it for a user.
package temporalserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/payguard/payguard/internal/devserver"
)

// Version is the Temporal server release payguard runs: the Makefile's
// TEMPORAL_SERVER_VERSION, compose's image tags and the schema directory
// (SchemaDir) are checked against it.
const Version = "v1.29.1"

// Module is the server's Go module: its cmd/server and cmd/tools/sql are
// the binaries, its schema/ directory the database schema.
const Module = "go.temporal.io/server"

// Where the config lives, relative to the module root: the server loads
// ConfigDir/ConfigEnv.yaml (`--config ops/temporal --env postgres`).
const (
	ConfigDir = "ops/temporal"
	ConfigEnv = "postgres"
	// DynamicConfigFile is the dynamic config beside it, which the config
	// names (DynamicConfigEnv).
	DynamicConfigFile = "dynamicconfig.yaml"
)

// The environment ops/temporal/postgres.yaml reads; each has the default
// below, written again in the YAML's template (a test holds them together).
const (
	PortBaseEnv      = "PAYGUARD_TEMPORAL_PORT_BASE"
	BindIPEnv        = "PAYGUARD_TEMPORAL_BIND_IP"
	SQLAddrEnv       = "PAYGUARD_TEMPORAL_SQL_ADDR"
	SQLUserEnv       = "PAYGUARD_TEMPORAL_SQL_USER"
	SQLPasswordEnv   = "PAYGUARD_TEMPORAL_SQL_PASSWORD"
	DBEnv            = "PAYGUARD_TEMPORAL_DB"
	VisibilityDBEnv  = "PAYGUARD_TEMPORAL_VISIBILITY_DB"
	DynamicConfigEnv = "PAYGUARD_TEMPORAL_DYNAMIC_CONFIG"
	LogLevelEnv      = "PAYGUARD_TEMPORAL_LOG_LEVEL"
)

// Defaults of that environment: a server a user starts by hand on the local
// PostgreSQL, beside (not on) the dev server's 7233.
const (
	DefaultPortBase     = 7243
	DefaultBindIP       = "127.0.0.1"
	DefaultSQLAddr      = "127.0.0.1:5432"
	DefaultSQLUser      = "postgres"
	DefaultDB           = "temporal"
	DefaultVisibilityDB = "temporal_visibility"
	DefaultLogLevel     = "warn"
)

// Ports is how many ports from the base the server listens on: frontend
// gRPC and HTTP, then gRPC and membership of frontend, history, matching and
// worker (the order ops/temporal/postgres.yaml gives them).
const Ports = 9

// Namespace is the namespace the server is given at start (payguard's
// config.DefaultNamespace; the real server, unlike the dev server, starts
// with none).
const Namespace = "default"

// Settings are one server's values of that environment.
type Settings struct {
	PortBase     int
	BindIP       string
	SQLAddr      string
	SQLUser      string
	SQLPassword  string
	DB           string
	VisibilityDB string
	// DynamicConfig is the dynamic config file, absolute (the server reads
	// it relative to its working directory).
	DynamicConfig string
	LogLevel      string
}

// DefaultSettings is what `make temporal-server` runs with: the defaults
// above and the repository's dynamic config.
func DefaultSettings() (Settings, error) {
	root, err := devserver.ModuleRoot()
	if err != nil {
		return Settings{}, err
	}
	return Settings{PortBase: DefaultPortBase, BindIP: DefaultBindIP, SQLAddr: DefaultSQLAddr, SQLUser: DefaultSQLUser,
		DB: DefaultDB, VisibilityDB: DefaultVisibilityDB, DynamicConfig: filepath.Join(root, ConfigDir, DynamicConfigFile),
		LogLevel: DefaultLogLevel}, nil
}

// Env is the environment the server process renders its config with.
func (s Settings) Env() []string {
	return []string{
		PortBaseEnv + "=" + strconv.Itoa(s.PortBase), BindIPEnv + "=" + s.BindIP,
		SQLAddrEnv + "=" + s.SQLAddr, SQLUserEnv + "=" + s.SQLUser, SQLPasswordEnv + "=" + s.SQLPassword,
		DBEnv + "=" + s.DB, VisibilityDBEnv + "=" + s.VisibilityDB,
		DynamicConfigEnv + "=" + s.DynamicConfig, LogLevelEnv + "=" + s.LogLevel,
	}
}

// FrontendAddr is the frontend's gRPC address, what clients dial.
func (s Settings) FrontendAddr() string { return fmt.Sprintf("127.0.0.1:%d", s.PortBase) }

// Args is the server's command line, run from root (the module root): the
// config in ConfigDir, every service in one process, no authorizer (a
// loopback development server, as the dev server is).
func Args(root string) []string {
	return []string{"--root", root, "--config", ConfigDir, "--env", ConfigEnv, "--allow-no-auth", "start"}
}

// ServerBinary finds temporal-server: PAYGUARD_TEMPORAL_SERVER, else bin/ at
// the module root (`make temporal-server-bin`).
func ServerBinary() (string, error) { return binary("PAYGUARD_TEMPORAL_SERVER", "temporal-server") }

// SQLTool finds temporal-sql-tool: PAYGUARD_TEMPORAL_SQL_TOOL, else bin/.
func SQLTool() (string, error) { return binary("PAYGUARD_TEMPORAL_SQL_TOOL", "temporal-sql-tool") }

// Binaries finds both: every start of the server needs the server and the
// SQL tool that sets up its databases.
func Binaries() (server, sqlTool string, err error) {
	if server, err = ServerBinary(); err != nil {
		return "", "", err
	}
	if sqlTool, err = SQLTool(); err != nil {
		return "", "", err
	}
	return server, sqlTool, nil
}

func binary(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	root, err := devserver.ModuleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no %s at %s: run `make temporal-server-bin`", name, p)
	}
	return p, nil
}
