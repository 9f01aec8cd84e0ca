-- The session name of the process that runs a load (application_name, src/db/pool.ts
-- sessionName: pid, host and a token drawn when the process starts). The dead-run cleanup
-- ends the sessions of that name: by pid@host alone, a live process that got the dead one's
-- pid on the same host (a restarted container) would have had its sessions ended too.
ALTER TABLE etl.runs ADD COLUMN session text;
