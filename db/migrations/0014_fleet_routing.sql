-- 0014_fleet_routing: what a job asks of the GPU that runs it, and the GPUs each daemon of a fleet
-- serves (docs/fleet.md). A job names a GPU model (matched against the words of a GPU's name), a
-- GPU uuid, labels that the claiming daemon must all carry, and how many GPUs it needs at once (two
-- for a split A/B); '' and no labels leave it to any daemon. The host that claimed a job is kept for
-- the fleet's reads, and a cancel asked of a daemon that does not run the job waits in
-- cancel_requested until the daemon that runs it stops it.
ALTER TABLE jobs ADD COLUMN gpu_model TEXT NOT NULL DEFAULT '';        -- upper case, '' = any model
ALTER TABLE jobs ADD COLUMN gpu_uuid TEXT NOT NULL DEFAULT '';         -- '' = any GPU
ALTER TABLE jobs ADD COLUMN gpus_needed INTEGER NOT NULL DEFAULT 1;    -- GPUs the job holds at once
ALTER TABLE jobs ADD COLUMN host TEXT NOT NULL DEFAULT '';             -- the claimant's host; '' = never claimed
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_by_host ON jobs (host, created_ms);
-- The labels a job asks for: a daemon claims it only when it carries every one.
CREATE TABLE job_labels (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  label TEXT NOT NULL,
  PRIMARY KEY (job_id, label)
);
-- Each daemon's GPUs as it last published them (every lease renewal): what `qgate device` shows for
-- the whole fleet. A row whose seen_ms is old belongs to a daemon that stopped or lost the database.
CREATE TABLE fleet_gpus (
  claimant TEXT NOT NULL,                  -- the daemon's claimant id (host and data dir)
  ordinal INTEGER NOT NULL,
  host TEXT NOT NULL,
  name TEXT NOT NULL,
  uuid TEXT NOT NULL,
  labels TEXT NOT NULL,                    -- the daemon's labels, comma-separated, sorted
  backend TEXT NOT NULL,
  qgate_version TEXT NOT NULL,
  running_job_id INTEGER,
  cotenant_state TEXT NOT NULL DEFAULT '',
  cotenant_reason TEXT NOT NULL DEFAULT '',
  seen_ms INTEGER NOT NULL,
  PRIMARY KEY (claimant, ordinal)
);
