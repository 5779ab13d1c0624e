-- Replies to chats that are not paired (pairing busy, a wrong code, a
-- lockout): each at most once per chat per window, whichever replica
-- answers, as HMAC-SHA256(pepper, chat id and reply), never the id itself.
-- Swept once the window is past.
CREATE TABLE stranger_replies (
    chat_hash       bytea PRIMARY KEY CHECK (octet_length(chat_hash) = 32),
    told_at         timestamptz NOT NULL
);
CREATE INDEX stranger_replies_told_at ON stranger_replies (told_at);

-- When the sender last delivered a message of each paired server: a round
-- takes the servers served longest ago first, so servers with old, deep
-- backlogs cannot fill every round.
ALTER TABLE pairings ADD COLUMN last_sent_at timestamptz;
