-- How many times the sender began sending a message to Telegram. A send
-- the relay died in (or whose answer never came) may have reached the
-- chat: the Bot API has no way to send a message once only, so the message
-- goes again and is counted, and the record of its delivery keeps the
-- count (a message shown twice is one whose record says more than 1).
ALTER TABLE chat_outbox ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE chat_messages ADD COLUMN attempts integer NOT NULL DEFAULT 1;
