-- quota.threshold after 0087 (a rotated key counts on its chain's meter): announced once a
-- month per meter (the dedupe), but about the key in use (the body's key_id, and so the
-- endpoints it goes to: those of the key that made the request, not of the first, revoked key).
DROP FUNCTION platform.queue_quota_thresholds(text, text, text, int, int, int[]);
CREATE FUNCTION platform.queue_quota_thresholds(p_key text, p_meter text, p_month text, p_plan text, p_used int, p_limit int, p_thresholds int[])
RETURNS void LANGUAGE sql AS $$
  INSERT INTO events.outbox (id, type, dedupe, body)
  SELECT 'evt_' || substr(md5(d.dedupe), 1, 24), 'quota.threshold', d.dedupe,
         jsonb_build_object(
           'id', 'evt_' || substr(md5(d.dedupe), 1, 24), 'type', 'quota.threshold',
           'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'api_version', 'v1',
           'data', jsonb_build_object('key_id', p_key, 'plan', p_plan, 'threshold', d.pct, 'used', p_used, 'limit', p_limit, 'month', p_month))
  FROM (SELECT t.pct, 'quota.threshold:' || p_meter || ':' || p_month || ':' || t.pct AS dedupe
          FROM unnest(p_thresholds) AS t(pct)
         WHERE p_used >= ceil(p_limit::numeric * t.pct / 100)) d
  ON CONFLICT DO NOTHING
$$;
