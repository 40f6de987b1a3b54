-- Lookup hints passed on to each order's workflow (--callback-auth
-- lookup): the endpoint passes at most one per order per interval and at
-- most a bounded number in all, fleet-wide (store.PassHint), so a flood
-- of unsigned callbacks cannot spend the workflow's signal budget.
CREATE TABLE IF NOT EXISTS order_hints (
    order_id text        PRIMARY KEY,
    passed   integer     NOT NULL,
    last_at  timestamptz NOT NULL
);
