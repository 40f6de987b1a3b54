-- One row per charge payguard refunded at the gateway, by (order,
-- transaction): two nets that refund the same charge (a late callback's
-- refund and the sender's undo, say) count it once
-- (payguard_charges_refunded_total, the REFUND event).
CREATE TABLE IF NOT EXISTS refunds (
    order_id        text        NOT NULL,
    transaction_key text        NOT NULL,
    amount          bigint      NOT NULL,
    refunded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, transaction_key)
);

ALTER TABLE payment_events DROP CONSTRAINT IF EXISTS payment_events_kind_check;
ALTER TABLE payment_events ADD CONSTRAINT payment_events_kind_check
    CHECK (kind IN ('ORDER', 'PAYMENT', 'RESERVATION', 'ATTEMPT', 'ANOMALY', 'CALLBACK', 'REFUND'));
