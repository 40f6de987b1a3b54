#!/usr/bin/env bash
# Makes sure PostgreSQL answers on 127.0.0.1:5432 and that the payguard
# database exists. Starts a local cluster that is installed but stopped;
# otherwise says what to run.
set -euo pipefail

host=${PGHOST_ADDR:-127.0.0.1}
port=${PGPORT_NUM:-5432}
db=${PAYGUARD_DB:-payguard}

ready() { pg_isready -q -h "$host" -p "$port" 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1; then
  echo "PostgreSQL client tools are not installed." >&2
  echo "Install PostgreSQL (Debian: apt-get install postgresql), or run 'docker compose up -d postgres'." >&2
  exit 1
fi

if ! ready; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    version=$(ls /etc/postgresql | sort -V | tail -n1)
    echo "Starting local PostgreSQL $version cluster 'main'..."
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 60); do ready && break; sleep 0.5; done
  fi
fi
if ! ready; then
  echo "PostgreSQL is not answering on $host:$port." >&2
  echo "Start it (pg_ctlcluster <version> main start), or run 'docker compose up -d postgres'." >&2
  exit 1
fi

if ! psql -h "$host" -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  psql -h "$host" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE $db"
  echo "Created database $db."
fi
echo "PostgreSQL is up on $host:$port (database $db)."
