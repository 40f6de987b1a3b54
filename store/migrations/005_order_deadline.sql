-- Each order's deadline (docs/design.md §2 step 5), so that what is still
-- open past it can be counted from the database alone: the worker exports
-- the count (payguard_orders_past_deadline) and an alert pages on it.
-- NULL for orders placed before this column, which are never counted.
-- IF NOT EXISTS: reconciliation (issue 13) wants the same column; whichever
-- migration runs second changes nothing.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS deadline timestamptz;
CREATE INDEX IF NOT EXISTS orders_open_deadline ON orders (deadline)
    WHERE status IN ('RESERVING', 'REQUESTING', 'PENDING');
