-- 0006_build_rollups: a trend point becomes one build's summary per series (profile, path, weight
-- type, tokens, backend, GPU) and week, whatever the number of jobs that measured it. 0005 kept one
-- row per job and series; a year of history then held tens of thousands of points per profile, too
-- many for a dashboard to read at every refresh. The week (Monday 00:00 UTC to the next) bounds what
-- one write recomputes: a baseline measured in every gate for a year is 52 points per series, each
-- of one week's runs, not one point that every new run re-sorts. A point's jobs stay one query away
-- (QueryTrend job_id), and every raw run two.
--
-- This file holds the schema only. The rows are computed by the store's own statement
-- (kRollupRecompute in db/src/store_history.cpp): the write path runs it for the (build, series,
-- tokens, week) groups a write touched, and the migration runner runs it over every run right after this
-- file, in the same transaction. 0005's table and its back-fill are superseded and dropped here.
--
-- Each row carries three summaries, one per co-tenant filter a trend can ask for:
--   quiet_*  runs known quiet (contended = 0);
--   open_*   runs not known contended (contended = 0 or NULL: no sampler);
--   all_*    every run, contended ones too.
-- For each: the run count, the median tok/s and its interval (the minimum and maximum of the same
-- runs), and the newest job among them (a point's job, so its runs are one query away). NULL
-- median when the count is 0.

DROP TABLE trend_rollups;

-- The write path recomputes one (build, series, tokens, week) group: this index finds its runs by a
-- range of started_ms. It replaces runs_by_build (build_id), which it serves as a prefix.
DROP INDEX runs_by_build;
CREATE INDEX runs_by_build_series ON runs (build_id, series_key, tokens, started_ms);

CREATE TABLE build_rollups (
  id              INTEGER PRIMARY KEY,
  build_id        INTEGER NOT NULL REFERENCES builds (id),
  series_key      TEXT NOT NULL,
  tokens          INTEGER NOT NULL,
  week_ms         INTEGER NOT NULL,             -- the week of the runs: its Monday 00:00 UTC
  profile         TEXT NOT NULL,
  weight_type     TEXT,
  path            TEXT NOT NULL,
  backend         TEXT NOT NULL,
  gpu_name        TEXT NOT NULL,
  build_name      TEXT NOT NULL,                -- the build's, copied so a trend needs no join
  build_sha256    TEXT NOT NULL,
  commit_sha      TEXT NOT NULL,
  first_ms        INTEGER NOT NULL,             -- the first run's start: where the point sits in time
  last_ms         INTEGER NOT NULL,             -- the last run's start: a trend window keeps the
                                                -- builds measured in it (last_ms >= since)
  jobs            INTEGER NOT NULL,             -- distinct jobs among all the runs (0: imported only)
  runs            INTEGER NOT NULL,             -- every finished run with a tok/s
  contended_runs  INTEGER NOT NULL,             -- of which contended = 1
  unknown_runs    INTEGER NOT NULL,             -- of which contended is NULL
  quiet_runs      INTEGER NOT NULL,
  quiet_median    REAL,
  quiet_low       REAL,
  quiet_high      REAL,
  quiet_last_job  INTEGER NOT NULL,             -- the newest job among the quiet runs, 0 when none
  open_runs       INTEGER NOT NULL,
  open_median     REAL,
  open_low        REAL,
  open_high       REAL,
  open_last_job   INTEGER NOT NULL,
  all_median      REAL NOT NULL,
  all_low         REAL NOT NULL,
  all_high        REAL NOT NULL,
  all_last_job    INTEGER NOT NULL
);
-- A trend's filters lead (profile, then weight type), the window follows; path and build name ride
-- in the index so rows they reject are never read from the table.
CREATE INDEX build_rollups_by_profile_type ON build_rollups (profile, weight_type, last_ms, path, build_name);
CREATE INDEX build_rollups_by_profile_time ON build_rollups (profile, last_ms, path, build_name);
CREATE INDEX build_rollups_by_time ON build_rollups (last_ms, path, build_name);
-- The write path rewrites one group's rows.
CREATE INDEX build_rollups_by_group ON build_rollups (build_id, series_key, tokens, week_ms);
