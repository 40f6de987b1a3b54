-- Placeholder: version 3 is reserved for another branch's migration, and
-- tern needs the versions contiguous for 004_reconcile.sql to load. Delete
-- this file when that branch's 003 is merged.
SELECT 1;
