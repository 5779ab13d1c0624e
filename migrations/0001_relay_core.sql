-- The relay's core: servers, the delivery outbox, messages waiting for the
-- chat, the registration limit, and the counts kept for good.

-- A server that registered. Only HMAC-SHA256(pepper, token) is kept.
CREATE TABLE servers (
    id              uuid PRIMARY KEY,
    token_hash      bytea NOT NULL CHECK (octet_length(token_hash) = 32),
    boot_id         uuid NOT NULL,
    install_source  text NOT NULL CHECK (install_source ~ '^[a-z0-9-]{1,32}$'),
    registered_at   timestamptz NOT NULL,
    -- Set when a chat pairs with the server; unpaired servers are erased
    -- 24 hours after they registered.
    paired_at       timestamptz
);
CREATE INDEX servers_unpaired ON servers (registered_at) WHERE paired_at IS NULL;

-- A known server id registered again from a different boot: the record is
-- never overwritten; the chat decides.
CREATE TABLE duplicate_cases (
    server_id       uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    boot_id         uuid NOT NULL,
    token_hash      bytea NOT NULL CHECK (octet_length(token_hash) = 32),
    opened_at       timestamptz NOT NULL,
    PRIMARY KEY (server_id, boot_id)
);

-- Registrations per address and day. The address is kept only as
-- HMAC-SHA256(pepper, address key), and the rows go when their day ends.
CREATE TABLE registration_counts (
    address_hash    bytea NOT NULL CHECK (octet_length(address_hash) = 32),
    day             date NOT NULL,
    registrations   integer NOT NULL,
    PRIMARY KEY (address_hash, day)
);

-- What waits for a server: a chat message or a button tap. A row is deleted
-- when the server acknowledges it, and after 24 hours at most.
CREATE TABLE outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    server_id       uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    delivery        jsonb NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE INDEX outbox_by_server ON outbox (server_id, id);
CREATE INDEX outbox_by_age ON outbox (created_at);

-- What a server sent for its chat (a message or an edit), by the id the
-- server gave it, so that a frame resent after a reconnect is kept once.
-- The Telegram side takes rows from here; they go after 24 hours at most.
CREATE TABLE chat_outbox (
    server_id       uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    id              uuid NOT NULL,
    body            jsonb NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (server_id, id)
);
CREATE INDEX chat_outbox_by_age ON chat_outbox (created_at);

-- Kept for good: counts per day and install source, nothing else.
CREATE TABLE daily_counts (
    day             date NOT NULL,
    install_source  text NOT NULL CHECK (install_source ~ '^[a-z0-9-]{1,32}$'),
    installs        integer NOT NULL DEFAULT 0,
    pairings        integer NOT NULL DEFAULT 0,
    PRIMARY KEY (day, install_source)
);

-- The head of each server's Warden journal, as the server last reported it
-- (its seq and hash, never its entries): it only ever moves forward.
ALTER TABLE servers ADD COLUMN journal_seq bigint;
ALTER TABLE servers ADD COLUMN journal_hash text CHECK (journal_hash ~ '^[0-9a-f]{64}$');
