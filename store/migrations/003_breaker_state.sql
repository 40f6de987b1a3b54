-- The fleet's circuit breakers (docs/design.md §6, --breaker-scope fleet):
-- every worker reads and writes one state per breaker here, so a dead
-- gateway is detected once for the fleet, not once per worker.

-- gobreaker's SharedState, as the library serialises it (JSON), by its key.
CREATE TABLE breaker_state (
    key        text PRIMARY KEY CHECK (key <> ''),
    data       bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The breakers' mutexes as leases. A holder that crashed or hangs cannot
-- stall the others: once expires_at has passed (by the database's clock,
-- the one clock every worker shares) the next caller takes the lease over.
-- One row per mutex, taken and given back by single-row statements, so no
-- two workers ever wait on each other's locks in a cycle.
CREATE TABLE breaker_leases (
    key        text PRIMARY KEY CHECK (key <> ''),
    holder     text NOT NULL CHECK (holder <> ''),
    expires_at timestamptz NOT NULL
);
