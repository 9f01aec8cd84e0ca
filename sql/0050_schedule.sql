-- The scheduler (agro schedule): one row per schedule, like graphile-worker's
-- known_crontabs, and one row per claimed slot (schedule, fire time). A slot is claimed
-- with INSERT … ON CONFLICT DO NOTHING, so of several schedulers only one runs it.
CREATE TABLE etl.schedules (
  schedule   text PRIMARY KEY,
  cron       text NOT NULL,
  timezone   text NOT NULL,
  first_seen timestamptz NOT NULL DEFAULT now(),
  -- The latest slot claimed: a start after downtime catches up once when it is older than the previous slot.
  last_slot  timestamptz
);

CREATE TABLE etl.schedule_slots (
  schedule    text NOT NULL REFERENCES etl.schedules,
  slot        timestamptz NOT NULL,
  owner       text NOT NULL,
  catch_up    boolean NOT NULL DEFAULT false,
  status      text NOT NULL DEFAULT 'running'
              CHECK (status IN ('running', 'done', 'failed', 'interrupted', 'skipped')),
  run_ids     bigint[] NOT NULL DEFAULT '{}',
  attempts    int NOT NULL DEFAULT 0,
  error       text,
  claimed_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  PRIMARY KEY (schedule, slot)
);
