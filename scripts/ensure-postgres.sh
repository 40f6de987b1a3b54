#!/usr/bin/env bash
# Makes sure PostgreSQL answers on 127.0.0.1:5432 and that the payguard
# database exists (`make postgres`, run by `make demo` and `make ci`):
#   - not installed: on Debian as root, installs Debian's postgresql (as the
#     Makefile installs Chromium), lets the postgres role in from loopback
#     without a password (the default DATABASE_URL's development setup), and
#     starts the cluster; anywhere else, says what to install and stops;
#   - installed but stopped: starts the local cluster;
#   - running: creates the database if it is missing.
# PAYGUARD_PG_CONF_DIR (default /etc/postgresql) is where Debian keeps the
# clusters; scripts_test.go points it, and PATH, at fakes to check each branch.
set -euo pipefail

host=${PGHOST_ADDR:-127.0.0.1}
port=${PGPORT_NUM:-5432}
db=${PAYGUARD_DB:-payguard}
conf=${PAYGUARD_PG_CONF_DIR:-/etc/postgresql}

ready() { pg_isready -q -h "$host" -p "$port" 2>/dev/null; }
have() { command -v "$1" >/dev/null 2>&1; }
cluster_version() { ls "$conf" 2>/dev/null | sort -V | tail -n1; }
installed() { have pg_isready && have psql && { ! have pg_ctlcluster || [ -n "$(cluster_version)" ]; }; }

cannot_install() {
  echo "PostgreSQL is not installed, and $1." >&2
  echo "Install it, then run this again (make postgres):" >&2
  echo "  Debian/Ubuntu: sudo apt-get install postgresql" >&2
  echo "  macOS:         brew install postgresql@16 && brew services start postgresql@16" >&2
  echo "  Docker:        docker compose up -d postgres" >&2
  echo "payguard connects as postgres@$host:$port without a password (DATABASE_URL to change that)." >&2
  exit 1
}

# Debian's clusters ask loopback clients for a password; payguard's
# development DATABASE_URL has none. Only a cluster this script installed is
# changed, and only its loopback lines.
trust_loopback() {
  local hba="$conf/$1/main/pg_hba.conf"
  [ -f "$hba" ] || return 0
  sed -i -E 's#^(host[[:space:]]+all[[:space:]]+all[[:space:]]+(127\.0\.0\.1/32|::1/128)[[:space:]]+)[a-z0-9-]+#\1trust#' "$hba"
  echo "Set loopback connections to trust in $hba (development only)."
}

if ! installed; then
  if ! have apt-get; then
    cannot_install "this is not a Debian system (no apt-get)"
  fi
  if [ "$(id -u)" != 0 ]; then
    cannot_install "installing it needs root"
  fi
  echo "Installing Debian's postgresql (first time: a minute)..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null ||
    cannot_install "apt-get install postgresql failed (run it yourself to see why)"
  version=$(cluster_version)
  if [ -z "$version" ]; then
    cannot_install "the package installed no cluster under $conf"
  fi
  trust_loopback "$version"
  if ready; then # the package's own start: reload for the new pg_hba.conf
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload || true
  fi
fi

if ! ready; then
  version=$(cluster_version)
  if have pg_ctlcluster && [ -n "$version" ]; then
    echo "Starting local PostgreSQL $version cluster 'main'..."
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 60); do ready && break; sleep 0.5; done
  fi
fi
if ! ready; then
  echo "PostgreSQL is installed but not answering on $host:$port." >&2
  echo "Start it (pg_ctlcluster <version> main start, or your service manager), or run 'docker compose up -d postgres'." >&2
  exit 1
fi

if ! psql -h "$host" -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  psql -h "$host" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE $db"
  echo "Created database $db."
fi
echo "PostgreSQL is up on $host:$port (database $db)."
