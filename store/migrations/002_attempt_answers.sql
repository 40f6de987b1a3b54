-- Money safety (docs: issue 10). An attempt now carries what a retry needs to
-- answer instead of sending again, and what keeps a keyed create's body the
-- same from every worker.

-- The workflow's authorisation of a re-send: after the grace period the
-- gateway knew no transaction of the order, so sending again cannot charge
-- twice. One authorisation lets at most one create reach the gateway.
ALTER TABLE payment_attempts ADD COLUMN resend_grant text;
-- The callback URL the order's first create carried: every later create of
-- the order carries it too, so a gateway keying on the body sees one body.
ALTER TABLE payment_attempts ADD COLUMN callback_url text NOT NULL DEFAULT '';
-- The gateway's code for a refused create (REJECTED).
ALTER TABLE payment_attempts ADD COLUMN reason text NOT NULL DEFAULT '';

-- A charge found on an order whose create was never answered (payment still
-- REQUESTED) is refunded by compensation.
INSERT INTO payment_transitions VALUES ('REQUESTED', 'REFUNDED');
