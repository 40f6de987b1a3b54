-- payguard schema. Every invariant of SPEC §3 that can be stated in SQL is
-- stated here, so that no code path (or hand-written psql session) can break it.

CREATE TABLE products (
    product_id text PRIMARY KEY CHECK (product_id <> ''),
    total      bigint NOT NULL CHECK (total >= 0),
    available  bigint NOT NULL CHECK (available >= 0),
    reserved   bigint NOT NULL CHECK (reserved >= 0),
    sold       bigint NOT NULL CHECK (sold >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_conserved CHECK (total = available + reserved + sold)
);

CREATE TABLE orders (
    order_id   text PRIMARY KEY CHECK (order_id <> ''),
    product_id text NOT NULL REFERENCES products,
    quantity   bigint NOT NULL CHECK (quantity > 0),
    amount     bigint NOT NULL CHECK (amount > 0),
    user_id    text NOT NULL,
    status     text NOT NULL CHECK (status IN
        ('RESERVING', 'REQUESTING', 'PENDING', 'CONFIRMED', 'FAILED', 'CANCELLED', 'REJECTED')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The legal moves of an order. A status update joins this table, so an
-- illegal move matches no row and changes nothing, whatever the caller does.
CREATE TABLE order_transitions (
    from_status text NOT NULL,
    to_status   text NOT NULL,
    PRIMARY KEY (from_status, to_status)
);
INSERT INTO order_transitions VALUES
    ('RESERVING', 'REQUESTING'), ('RESERVING', 'REJECTED'), ('RESERVING', 'CANCELLED'),
    ('REQUESTING', 'PENDING'), ('REQUESTING', 'FAILED'), ('REQUESTING', 'CANCELLED'),
    ('REQUESTING', 'CONFIRMED'),
    ('PENDING', 'CONFIRMED'), ('PENDING', 'FAILED'), ('PENDING', 'CANCELLED');

-- One reservation per order (the primary key), settled at most once: the
-- state moves HELD -> COMMITTED or HELD -> RELEASED and never again.
CREATE TABLE reservations (
    order_id   text PRIMARY KEY REFERENCES orders,
    product_id text NOT NULL REFERENCES products,
    quantity   bigint NOT NULL CHECK (quantity > 0),
    state      text NOT NULL CHECK (state IN ('HELD', 'COMMITTED', 'RELEASED')),
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    CHECK ((state = 'HELD') = (settled_at IS NULL))
);

CREATE TABLE payments (
    order_id        text PRIMARY KEY REFERENCES orders,
    status          text NOT NULL CHECK (status IN
        ('REQUESTED', 'PENDING', 'UNKNOWN', 'SUCCESS', 'FAILED', 'CANCELLED', 'REFUNDED')),
    transaction_key text,
    reason          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (status <> 'SUCCESS' OR transaction_key IS NOT NULL)
);

CREATE TABLE payment_transitions (
    from_status text NOT NULL,
    to_status   text NOT NULL,
    PRIMARY KEY (from_status, to_status)
);
INSERT INTO payment_transitions VALUES
    ('REQUESTED', 'PENDING'), ('REQUESTED', 'UNKNOWN'), ('REQUESTED', 'FAILED'),
    ('REQUESTED', 'SUCCESS'), ('REQUESTED', 'CANCELLED'),
    ('UNKNOWN', 'REQUESTED'), ('UNKNOWN', 'PENDING'), ('UNKNOWN', 'SUCCESS'), ('UNKNOWN', 'FAILED'),
    ('UNKNOWN', 'CANCELLED'), ('UNKNOWN', 'REFUNDED'),
    ('PENDING', 'SUCCESS'), ('PENDING', 'FAILED'), ('PENDING', 'CANCELLED'), ('PENDING', 'REFUNDED'),
    -- A charge that lands after the order gave up is refunded, never dropped.
    ('SUCCESS', 'REFUNDED'), ('CANCELLED', 'REFUNDED'), ('FAILED', 'REFUNDED');

-- Every create sent to the gateway, written before it is sent. A row still
-- SENDING means "sent, answer never recorded": the worker may have died with
-- the request on the wire, so nobody may send again until the gateway has
-- been asked what it knows (SPEC §1). At most one such row per order.
CREATE TABLE payment_attempts (
    order_id        text NOT NULL REFERENCES orders,
    attempt_no      int NOT NULL CHECK (attempt_no > 0),
    state           text NOT NULL CHECK (state IN ('SENDING', 'ANSWERED')),
    outcome         text CHECK (outcome IN ('ACCEPTED', 'UNREACHABLE', 'UNKNOWN', 'REJECTED')),
    transaction_key text,
    idempotency_key text,
    detail          text NOT NULL DEFAULT '',
    sent_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    answered_at     timestamptz,
    PRIMARY KEY (order_id, attempt_no),
    CHECK ((state = 'SENDING') = (outcome IS NULL))
);
CREATE UNIQUE INDEX payment_attempts_one_in_flight ON payment_attempts (order_id) WHERE state = 'SENDING';

-- Append-only history of every state change and every anomaly.
CREATE TABLE payment_events (
    event_id    bigserial PRIMARY KEY,
    order_id    text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('ORDER', 'PAYMENT', 'RESERVATION', 'ATTEMPT', 'ANOMALY', 'CALLBACK')),
    from_status text NOT NULL DEFAULT '',
    to_status   text NOT NULL DEFAULT '',
    cause       text NOT NULL,
    detail      jsonb NOT NULL DEFAULT '{}',
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX payment_events_order ON payment_events (order_id, event_id);

CREATE FUNCTION payment_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'payment_events is append-only';
END $$;
CREATE TRIGGER payment_events_append_only BEFORE UPDATE OR DELETE ON payment_events
    FOR EACH ROW EXECUTE FUNCTION payment_events_append_only();
