-- 0013_job_leases: a running job is held by the daemon that claimed it, under a lease that daemon
-- renews while it lives (docs/fleet.md). Several daemons share one PostgreSQL database: a daemon
-- that starts puts back the jobs its own earlier life left running, never another live daemon's,
-- and a job whose lease ran out (its daemon died, or lost the database) goes back to the queue for
-- any daemon, its attempt counted as a daemon's death. Jobs claimed before this migration have no
-- claimant; the next daemon to start takes them back as before.
ALTER TABLE jobs ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';  -- the claimant's id: host and data dir
ALTER TABLE jobs ADD COLUMN lease_expires_ms INTEGER;             -- set while running under a lease
CREATE INDEX jobs_by_lease ON jobs (lease_expires_ms) WHERE state = 'running';
