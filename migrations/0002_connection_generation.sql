-- One connection per server across every replica: each hello takes the
-- next generation, and a connection whose generation is no longer the
-- server's is replaced wherever it is.
ALTER TABLE servers ADD COLUMN connection_gen bigint NOT NULL DEFAULT 0;
