CREATE UNLOGGED TABLE {{fix}} (src_seq bigint PRIMARY KEY, geom geometry, status text NOT NULL, error text) WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false)
