package payguard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripts/ensure-postgres.sh decides between installing, starting and
// explaining. The real install cannot run here (it would replace the
// PostgreSQL every test uses), so each branch runs against fakes: a PATH
// holding only the shell's basic tools and recording stand-ins for
// apt-get, id and the PostgreSQL tools, and PAYGUARD_PG_CONF_DIR pointing
// at a scratch /etc/postgresql. What this proves is the script's decisions
// and the commands it issues, not Debian's package.

// Fake PostgreSQL tools: pg_ctlcluster start makes pg_isready answer.
const fakePG = `
cat > "$BIN/pg_isready" <<'X'
#!/usr/bin/env bash
[ -e "$STATE/running" ]
X
cat > "$BIN/pg_ctlcluster" <<'X'
#!/usr/bin/env bash
echo "pg_ctlcluster $*" >> "$STATE/log"
[ "$4" = start ] && touch "$STATE/running"
exit 0
X
cat > "$BIN/psql" <<'X'
#!/usr/bin/env bash
echo "psql $*" >> "$STATE/log"
X
chmod +x "$BIN/pg_isready" "$BIN/pg_ctlcluster" "$BIN/psql"
`

type pgSandbox struct {
	bin, state, conf string
}

func newPGSandbox(t *testing.T, withAptGet bool, uid string) pgSandbox {
	t.Helper()
	root := t.TempDir()
	s := pgSandbox{bin: filepath.Join(root, "bin"), state: filepath.Join(root, "state"), conf: filepath.Join(root, "etc-postgresql")}
	require.NoError(t, os.MkdirAll(s.bin, 0o755))
	require.NoError(t, os.MkdirAll(s.state, 0o755))
	for _, tool := range []string{"bash", "env", "ls", "sort", "tail", "seq", "sleep", "grep", "sed", "cat", "chmod", "touch", "mkdir"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(s.bin, tool)))
	}
	s.write(t, "id", "#!/usr/bin/env bash\necho "+uid+"\n")
	if withAptGet {
		// Installing creates the tools and a cluster whose pg_hba.conf
		// asks loopback clients for a password, as Debian's does.
		s.write(t, "apt-get", `#!/usr/bin/env bash
echo "apt-get $*" >> "$STATE/log"
if [[ " $* " == *" install "* ]]; then
`+fakePG+`
  mkdir -p "$CONF/16/main"
  printf 'local all postgres peer\nhost all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n' > "$CONF/16/main/pg_hba.conf"
fi
`)
	}
	return s
}

func (s pgSandbox) write(t *testing.T, name, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.bin, name), []byte(text), 0o755))
}

func (s pgSandbox) run(t *testing.T) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "bash"), "scripts/ensure-postgres.sh")
	cmd.Env = []string{"PATH=" + s.bin, "BIN=" + s.bin, "STATE=" + s.state, "CONF=" + s.conf, "PAYGUARD_PG_CONF_DIR=" + s.conf}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s pgSandbox) log(t *testing.T) string {
	raw, err := os.ReadFile(filepath.Join(s.state, "log"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(raw)
}

func TestEnsurePostgresInstallsOnDebianAsRoot(t *testing.T) {
	s := newPGSandbox(t, true, "0")
	out, err := s.run(t)
	require.NoError(t, err, out)
	log := s.log(t)
	assert.Contains(t, log, "apt-get update")
	assert.Contains(t, log, "apt-get install -y -qq postgresql")
	assert.Contains(t, log, "pg_ctlcluster --skip-systemctl-redirect 16 main start", "the new cluster is started")
	assert.Contains(t, log, "CREATE DATABASE payguard")
	hba, err := os.ReadFile(filepath.Join(s.conf, "16", "main", "pg_hba.conf"))
	require.NoError(t, err)
	assert.Contains(t, string(hba), "host all all 127.0.0.1/32 trust")
	assert.Contains(t, string(hba), "host all all ::1/128 trust")
	assert.Contains(t, string(hba), "local all postgres peer", "only the loopback host lines change")
	assert.Contains(t, out, "PostgreSQL is up on 127.0.0.1:5432")
}

func TestEnsurePostgresSaysWhatToDoWhereItCannotInstall(t *testing.T) {
	for name, s := range map[string]pgSandbox{
		"not root":   newPGSandbox(t, true, "1000"),
		"not Debian": newPGSandbox(t, false, "0"),
	} {
		t.Run(name, func(t *testing.T) {
			out, err := s.run(t)
			require.Error(t, err, "it fails: %s", out)
			assert.Contains(t, out, "sudo apt-get install postgresql")
			assert.Contains(t, out, "docker compose up -d postgres")
			assert.NotContains(t, s.log(t), "apt-get install", "nothing installed")
		})
	}
}

func TestEnsurePostgresStartsAnInstalledCluster(t *testing.T) {
	s := newPGSandbox(t, true, "0")
	cmd := exec.Command(filepath.Join(s.bin, "bash"), "-c", fakePG+`mkdir -p "$CONF/15/main"`)
	cmd.Env = []string{"PATH=" + s.bin, "BIN=" + s.bin, "STATE=" + s.state, "CONF=" + s.conf}
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	out, err := s.run(t)
	require.NoError(t, err, out)
	log := s.log(t)
	assert.NotContains(t, log, "apt-get", "installed already")
	assert.Contains(t, log, "pg_ctlcluster --skip-systemctl-redirect 15 main start")

	out, err = s.run(t) // now running: nothing to start
	require.NoError(t, err, out)
	assert.Equal(t, 1, strings.Count(s.log(t), "main start"))
}
