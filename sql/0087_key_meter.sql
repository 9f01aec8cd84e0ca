-- A rotated key's successor is the same key for rate limits and the monthly quota ("per API
-- key", the reference): it counts on its predecessor's meter. Before, `agro keys rotate` (or
-- the panel's Rotate) gave the successor a fresh month, and repeated rotations an unbounded
-- quota. meter_id NULL: the key counts on its own id.
ALTER TABLE platform.api_keys ADD COLUMN meter_id text;

-- Successors already issued: the first key of their rotation chain.
WITH RECURSIVE chain AS (
  SELECT k.id, k.id AS root FROM platform.api_keys k
   WHERE NOT EXISTS (SELECT 1 FROM platform.api_keys p WHERE p.replaced_by = k.id)
  UNION ALL
  SELECT p.replaced_by, c.root FROM chain c JOIN platform.api_keys p ON p.id = c.id WHERE p.replaced_by IS NOT NULL
)
UPDATE platform.api_keys k SET meter_id = c.root FROM chain c WHERE c.id = k.id AND c.root <> k.id;
