-- Admission in one round trip (issue 10, performance): the per-minute rate counter and the
-- monthly quota reservation in one function call, so that a metered request costs one
-- statement before its work and none after it when the answer counts.
--
-- Quota is reserved at admission, not counted after the answer: a burst of N concurrent
-- requests with M units left yields exactly M admissions, whatever the number of server
-- processes (the reservation is a conditional UPDATE of one row, serialised by its row lock
-- and re-checked on the latest version under READ COMMITTED). An answer that turns out not to
-- count (4xx/5xx, an idempotent replay) gives its unit back with platform.refund_quota.

-- The threshold events of a month's usage (70/90/100 %), one row per (key, month, threshold)
-- whatever the concurrency (unique `dedupe`, deterministic id). `>=` (not `=`) so that a plan
-- change mid-month still emits the thresholds it jumps over. Called once an answer is known to
-- count (not at admission: a reservation that is refunded must not announce a threshold).
CREATE FUNCTION platform.queue_quota_thresholds(p_key text, p_month text, p_plan text, p_used int, p_limit int, p_thresholds int[])
RETURNS void LANGUAGE sql AS $$
  INSERT INTO events.outbox (id, type, dedupe, body)
  SELECT 'evt_' || substr(md5(d.dedupe), 1, 24), 'quota.threshold', d.dedupe,
         jsonb_build_object(
           'id', 'evt_' || substr(md5(d.dedupe), 1, 24), 'type', 'quota.threshold',
           'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'api_version', 'v1',
           'data', jsonb_build_object('key_id', p_key, 'plan', p_plan, 'threshold', d.pct, 'used', p_used, 'limit', p_limit, 'month', p_month))
  FROM (SELECT t.pct, 'quota.threshold:' || p_key || ':' || p_month || ':' || t.pct AS dedupe
          FROM unnest(p_thresholds) AS t(pct)
         WHERE p_used >= ceil(p_limit::numeric * t.pct / 100)) d
  ON CONFLICT DO NOTHING
$$;

-- Admits requests in one statement (a server process sends those it receives while its previous
-- admission is in flight together: one round trip and one transaction for a handful of
-- requests under load, one per request when idle). For each element, in (key, arrival) order:
--  1. counts it in its key's minute window;
--  2. when it is within the rate limit and p_reserve (a live key on a billable route), reserves
--     one unit of the month's quota if one is left;
--  3. returns the window's count, the month's usage (after the reservation when made, read
--     afresh otherwise so a refusal reports the latest count) and whether a unit was reserved.
-- Rows are locked in one global order (key; its window row before its usage row), so two
-- processes' batches may wait on each other but never deadlock, and a key's requests get
-- consecutive counts in the order they arrived. plpgsql: each statement sees the rows
-- committed before it, and its plans are cached per session.
CREATE FUNCTION platform.admit_requests(
  p_keys text[], p_windows timestamptz[], p_months text[], p_per_minute int[], p_per_month int[], p_reserve boolean[])
RETURNS TABLE (i int, rate_n int, quota_used int, reserved boolean)
LANGUAGE plpgsql AS $$
DECLARE
  j int;
  k text;
  m date;
BEGIN
  FOR j IN SELECT s FROM generate_subscripts(p_keys, 1) AS s ORDER BY p_keys[s], s LOOP
    i := j;
    k := p_keys[j];
    m := (p_months[j] || '-01')::date;
    -- A plain UPDATE first (the row exists but for a key's first request of a minute); the
    -- upsert only then: an INSERT … ON CONFLICT costs a speculative index probe every time.
    UPDATE platform.rate_windows w SET n = w.n + 1 WHERE w.key_id = k AND w.window_start = p_windows[j] RETURNING w.n INTO rate_n;
    IF NOT FOUND THEN
      INSERT INTO platform.rate_windows AS w (key_id, window_start, n) VALUES (k, p_windows[j], 1)
      ON CONFLICT (key_id, window_start) DO UPDATE SET n = w.n + 1
      RETURNING w.n INTO rate_n;
    END IF;
    reserved := false;
    IF p_reserve[j] AND rate_n <= p_per_minute[j] AND p_per_month[j] > 0 THEN
      -- The condition is re-checked on the latest row version once its lock is held (READ
      -- COMMITTED), so concurrent reservations, from any process, never overshoot.
      UPDATE platform.usage_months u SET used = u.used + 1 WHERE u.key_id = k AND u.month = m AND u.used < p_per_month[j] RETURNING u.used INTO quota_used;
      reserved := FOUND;
      IF NOT reserved AND NOT EXISTS (SELECT 1 FROM platform.usage_months u WHERE u.key_id = k AND u.month = m) THEN
        INSERT INTO platform.usage_months AS u (key_id, month, used) VALUES (k, m, 1)
        ON CONFLICT (key_id, month) DO UPDATE SET used = u.used + 1 WHERE u.used < p_per_month[j]
        RETURNING u.used INTO quota_used;
        reserved := FOUND;
      END IF;
    END IF;
    IF NOT reserved THEN
      SELECT u.used INTO quota_used FROM platform.usage_months u WHERE u.key_id = k AND u.month = m;
      quota_used := coalesce(quota_used, 0);
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

-- Gives back a unit reserved at admission (the answer did not count). Returns the month's
-- usage after it (null when there was no row: the usage was reset meanwhile).
CREATE FUNCTION platform.refund_quota(p_key text, p_month text)
RETURNS int LANGUAGE sql AS $$
  UPDATE platform.usage_months SET used = used - 1
   WHERE key_id = p_key AND month = (p_month || '-01')::date AND used > 0
  RETURNING used
$$;
