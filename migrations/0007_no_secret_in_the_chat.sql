-- A PIN is typed only in the Mini App, sealed for the Warden: the chat's
-- next message is never taken for a secret any more. A secret still queued
-- for a server is erased (no server reads that delivery now, and it would
-- hold up the deliveries behind it), and the mark goes with its column.
DELETE FROM outbox WHERE delivery->>'kind' = 'secret';
ALTER TABLE pairings DROP COLUMN secret_until;
