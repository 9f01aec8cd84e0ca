-- Usage a successor counted on its own id before 0087 joins its meter's month: otherwise the
-- month of the migration would start the chain's count again from its first key's share.
INSERT INTO platform.usage_months AS u (key_id, month, used)
SELECT k.meter_id, m.month, sum(m.used)
  FROM platform.usage_months m JOIN platform.api_keys k ON k.id = m.key_id
 WHERE k.meter_id IS NOT NULL
 GROUP BY 1, 2
ON CONFLICT (key_id, month) DO UPDATE SET used = u.used + EXCLUDED.used;
DELETE FROM platform.usage_months m USING platform.api_keys k WHERE k.id = m.key_id AND k.meter_id IS NOT NULL;
