-- The webhook fan-out and the panel's usage find a key's siblings on its meter by
-- coalesce(meter_id, id) (src/events/delivery.ts, src/platform/panel-sql.ts): an index for it.
CREATE INDEX IF NOT EXISTS api_keys_meter ON platform.api_keys ((coalesce(meter_id, id)));
