-- An order leaving RESERVING (reserved, rejected or cancelled: its first
-- step) is announced on channel payguard_first_step as "<order id>
-- <status>" (an order id holds no space), in
-- the transaction that moves it, so the notification is delivered when
-- that transaction commits and never for one rolled back. The HTTP API
-- listens (store.FirstSteps) and answers a new order when it hears it,
-- rather than polling its row. The channel's name is store.FirstStepChannel.
CREATE OR REPLACE FUNCTION payguard_first_step_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('payguard_first_step', NEW.order_id || ' ' || NEW.status);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS orders_first_step ON orders;
CREATE TRIGGER orders_first_step AFTER UPDATE OF status ON orders
    FOR EACH ROW WHEN (OLD.status = 'RESERVING' AND NEW.status <> 'RESERVING')
    EXECUTE FUNCTION payguard_first_step_notify();
