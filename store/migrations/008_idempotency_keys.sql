-- The HTTP API's Idempotency-Key: one row per (customer, key), holding the
-- request's fingerprint, the order it placed and, once answered, the
-- answer, replayed to a repeat for 24 hours (store.BeginIdempotent).
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id      text        NOT NULL,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    order_id     text        NOT NULL,
    status_code  integer,
    answer       bytea,
    locked_until timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at);
