package temporalserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SchemaDirEnv names a schema directory to use instead of the module
// cache's (one holding postgresql/v12/…, as the admin-tools image's
// /etc/temporal/schema does).
const SchemaDirEnv = "PAYGUARD_TEMPORAL_SCHEMA_DIR"

// The versioned schema directories inside the server module's schema/:
// temporal-sql-tool update-schema applies each version in them in order.
const (
	SchemaPath           = "postgresql/v12/temporal/versioned"
	VisibilitySchemaPath = "postgresql/v12/visibility/versioned"
)

// SchemaDir is the server module's schema directory: SchemaDirEnv, else
// schema/ of the module in the Go module cache, which `go mod download
// -json go.temporal.io/server@Version` fetches (once; `make
// temporal-server-bin` already has) and names in its Dir. The schema is the
// release's own, so it matches the binaries the Makefile builds from the
// same module.
func SchemaDir(ctx context.Context) (string, error) {
	if d := os.Getenv(SchemaDirEnv); d != "" {
		return d, nil
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+Version)
	// Outside any module: a module download, not a change to payguard's go.mod.
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", Module, Version, err, strings.TrimSpace(stderr.String()))
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", Module, Version, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no module directory: %s", Module, Version, m.Error)
	}
	return filepath.Join(m.Dir, "schema"), nil
}

// Databases are a server's two databases on one PostgreSQL server.
type Databases struct {
	AdminURL         string // the PostgreSQL server's admin database, as devserver.AdminDatabaseURL
	Main, Visibility string
}

// NewDatabases names a fresh pair for one run: temporal_<suffix> and
// temporal_visibility_<suffix>.
func NewDatabases(adminURL, suffix string) Databases {
	return Databases{AdminURL: adminURL, Main: DefaultDB + "_" + suffix, Visibility: DefaultVisibilityDB + "_" + suffix}
}

// Settings are the server settings that reach these databases, from
// base (e.g. DefaultSettings) with its SQL fields replaced.
func (d Databases) Settings(base Settings) (Settings, error) {
	u, err := url.Parse(d.AdminURL)
	if err != nil {
		return Settings{}, err
	}
	base.SQLAddr = u.Host
	if u.Port() == "" {
		base.SQLAddr = net.JoinHostPort(u.Hostname(), "5432")
	}
	base.SQLUser = u.User.Username()
	base.SQLPassword, _ = u.User.Password()
	base.DB, base.VisibilityDB = d.Main, d.Visibility
	return base, nil
}

// Setup creates both databases and brings their schemas to the release's
// latest version with temporal-sql-tool (tool): create-database,
// setup-schema -v 0.0 (the version table), update-schema -d from
// SchemaDir. Databases that already hold the schema are left as they are
// (update-schema applies only the versions they lack), so `make
// temporal-server` can run it at every start.
func (d Databases) Setup(ctx context.Context, tool string) error {
	dir, err := SchemaDir(ctx)
	if err != nil {
		return err
	}
	s, err := d.Settings(Settings{})
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(s.SQLAddr)
	if err != nil {
		return err
	}
	for _, db := range []struct{ name, schema string }{{d.Main, SchemaPath}, {d.Visibility, VisibilitySchemaPath}} {
		exists, err := d.exists(ctx, db.name)
		if err != nil {
			return err
		}
		base := []string{"--plugin", "postgres12", "--ep", host, "--port", port, "--user", s.SQLUser, "--db", db.name}
		var steps [][]string
		if !exists {
			steps = append(steps, []string{"create-database"}, []string{"setup-schema", "-v", "0.0"})
		}
		steps = append(steps, []string{"update-schema", "-d", filepath.Join(dir, db.schema)})
		for _, step := range steps {
			cmd := exec.CommandContext(ctx, tool, append(base, step...)...)
			cmd.Env = append(os.Environ(), "SQL_PASSWORD="+s.SQLPassword)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s on %s: %w\n%s", step[0], db.name, err, out)
			}
		}
	}
	return nil
}

func (d Databases) exists(ctx context.Context, name string) (bool, error) {
	admin, err := pgx.Connect(ctx, d.AdminURL)
	if err != nil {
		return false, fmt.Errorf("postgres is not reachable (run `make postgres`): %w", err)
	}
	defer admin.Close(ctx)
	var n int
	err = admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n)
	return n > 0, err
}

// Drop drops both databases, whoever is still connected.
func (d Databases) Drop(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, d.AdminURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	for _, name := range []string{d.Main, d.Visibility} {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
	}
	return nil
}
