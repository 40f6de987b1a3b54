-- Reconciliation (issue 13). The sweep pages through orders by when they
-- last changed (store.ReconcileCandidates): without this index every page
-- would scan the whole table.
CREATE INDEX orders_updated ON orders (updated_at, order_id);
