-- Key rotation (issue 10): a rotated key gets a revocation in the future (the grace period)
-- and points at its successor. A key is active while revoked_at is null or still ahead.
ALTER TABLE platform.api_keys ADD COLUMN replaced_by text REFERENCES platform.api_keys (id);
