-- A CONFIRMED order refunded in full returns its stock: its COMMITTED
-- reservation moves to RETURNED, once (store.settleReservation).
ALTER TABLE reservations DROP CONSTRAINT IF EXISTS reservations_state_check;
ALTER TABLE reservations ADD CONSTRAINT reservations_state_check
    CHECK (state IN ('HELD', 'COMMITTED', 'RELEASED', 'RETURNED'));
