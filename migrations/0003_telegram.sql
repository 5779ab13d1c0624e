-- The relay's Telegram side: updates already taken, pairing, the chat of
-- each paired server, what the relay delivered to chats (ids and hashes,
-- never text) and the key it signs taps with.

-- Update ids already taken, so that an update Telegram sends twice (or
-- that reaches two replicas) is handled once. Ids are a bot's own: a relay
-- given another bot's token must not take its ids for repeats. Rows go
-- after 24 hours.
CREATE TABLE telegram_updates (
    bot_id          bigint NOT NULL,
    update_id       bigint NOT NULL,
    seen_at         timestamptz NOT NULL,
    PRIMARY KEY (bot_id, update_id)
);
CREATE INDEX telegram_updates_by_age ON telegram_updates (seen_at);

-- Callback query ids already answered: a query that comes again in
-- another update is not forwarded twice. Rows go after 24 hours.
CREATE TABLE telegram_callbacks (
    bot_id          bigint NOT NULL,
    query_id        text NOT NULL,
    seen_at         timestamptz NOT NULL,
    PRIMARY KEY (bot_id, query_id)
);
CREATE INDEX telegram_callbacks_by_age ON telegram_callbacks (seen_at);

-- A server's live pairing code, as HMAC-SHA256(pepper, code): one per
-- server (a new request replaces it), single use, fifteen minutes.
CREATE TABLE pairing_codes (
    code_hash       bytea PRIMARY KEY CHECK (octet_length(code_hash) = 32),
    server_id       uuid NOT NULL UNIQUE REFERENCES servers (id) ON DELETE CASCADE,
    expires_at      timestamptz NOT NULL
);

-- The chat a paired server talks to. Pairing happens only in a private
-- chat, whose id is the person's account: UNIQUE makes it one server per
-- Telegram account. The id is kept in clear because the relay writes to it.
CREATE TABLE pairings (
    server_id       uuid PRIMARY KEY REFERENCES servers (id) ON DELETE CASCADE,
    chat_id         bigint NOT NULL UNIQUE,
    paired_at       timestamptz NOT NULL
);

-- Wrong pairing codes, per chat, per account and in all, as
-- HMAC-SHA256(pepper, key): a count per window, and a lock-out.
CREATE TABLE pairing_guesses (
    key_hash        bytea PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    window_start    timestamptz NOT NULL,
    failures        integer NOT NULL,
    locked_until    timestamptz
);

-- Chats that are not paired and were told so once, as
-- HMAC-SHA256(pepper, chat id): never the id itself.
CREATE TABLE foreign_chats (
    chat_hash       bytea PRIMARY KEY CHECK (octet_length(chat_hash) = 32),
    told_at         timestamptz NOT NULL
);

-- Each message the relay delivered for a server, by the server's id for
-- it: the chat, Telegram's id of the part that carries the buttons, and the
-- SHA-256 of that part's exact text (the text itself is gone on delivery).
CREATE TABLE chat_messages (
    server_id       uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    message         uuid NOT NULL,
    chat_id         bigint NOT NULL,
    telegram_id     bigint NOT NULL,
    text_sha256     bytea NOT NULL CHECK (octet_length(text_sha256) = 32),
    sent_at         timestamptz NOT NULL,
    PRIMARY KEY (server_id, message)
);
CREATE INDEX chat_messages_by_age ON chat_messages (sent_at);

-- The buttons of a delivered message, by the opaque random id Telegram
-- carries back as callback data. A tap names one of these or is expired.
CREATE TABLE chat_buttons (
    callback_id     text PRIMARY KEY CHECK (callback_id ~ '^[A-Za-z0-9_-]{22}$'),
    server_id       uuid NOT NULL,
    message         uuid NOT NULL,
    button          text NOT NULL,
    label           text NOT NULL,
    action          text CHECK (action ~ '^[0-9a-f]{32}$'),
    FOREIGN KEY (server_id, message) REFERENCES chat_messages (server_id, message) ON DELETE CASCADE
);
CREATE INDEX chat_buttons_by_message ON chat_buttons (server_id, message);

-- The relay's own buttons (a duplicate case's choice, unpairing), apart
-- from the servers' so that a server can never offer one.
CREATE TABLE relay_buttons (
    callback_id     text PRIMARY KEY CHECK (callback_id ~ '^[A-Za-z0-9_-]{22}$'),
    chat_id         bigint NOT NULL,
    telegram_id     bigint NOT NULL,
    server_id       uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    -- The duplicate case's boot id, for its two choices.
    boot_id         uuid,
    choice          text NOT NULL
                    CHECK (choice IN ('reinstall', 'other_machine', 'unpair', 'keep')),
    created_at      timestamptz NOT NULL
);
CREATE INDEX relay_buttons_by_age ON relay_buttons (created_at);
-- Messages for a chat leave in the order they came, per server.
ALTER TABLE chat_outbox ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX chat_outbox_by_server ON chat_outbox (server_id, seq);

-- A duplicate case is shown in the paired chat once.
ALTER TABLE duplicate_cases ADD COLUMN shown_at timestamptz;

-- The key the relay signs forwarded taps with (minisign, Ed25519), made at
-- the first start unless the operator names a key file.
CREATE TABLE relay_keys (
    name            text PRIMARY KEY,
    secret_key      text NOT NULL,
    public_key      text NOT NULL,
    created_at      timestamptz NOT NULL
);
