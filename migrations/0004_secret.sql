-- A paired chat whose next text message is a secret (a PIN the server
-- asked for): until when. The relay deletes that message from the chat once
-- read and delivers it as a secret; the mark is cleared as it is used.
ALTER TABLE pairings ADD COLUMN secret_until timestamptz;
