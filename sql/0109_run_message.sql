-- What a run that ended without loading says about it (an unchanged source: identical to which
-- snapshot, or to a snapshot an operator rolled back); `agro report r<run>` repeats it.
ALTER TABLE etl.runs ADD COLUMN IF NOT EXISTS message text;
