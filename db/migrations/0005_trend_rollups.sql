-- 0005_trend_rollups: trend points kept at write time. A trend point is one job's summary of its
-- finished runs (state done, with a tok/s) per build and series (profile, path, weight type, tokens,
-- backend, GPU); imported results (no job) are summarised per build and series instead. The store
-- rewrites a job's rows (or an imported build's) in the same transaction as every write that changes
-- one of its runs (add_run, finish_run, record_runs, import_external, put_cotenant), so a row always
-- agrees with the runs it summarises. QueryTrend reads these rows: one index range scan, no join.
--
-- Each row carries three summaries, one per co-tenant filter a trend can ask for:
--   quiet_*  runs known quiet (contended = 0);
--   open_*   runs not known contended (contended = 0 or NULL: no sampler);
--   all_*    every run, contended ones too.
-- For each: the run count, the median tok/s, and its interval, which is the minimum and maximum of
-- the same runs (a job has a handful of runs per series, too few for an order-statistic interval
-- of the median to be narrower than the range). NULL median when the count is 0.
-- job_id is 0 for imported results (a key column, so it takes no NULL).

CREATE TABLE trend_rollups (
  id              INTEGER PRIMARY KEY,
  job_id          INTEGER NOT NULL DEFAULT 0,   -- 0 = imported results, summarised per build
  build_id        INTEGER NOT NULL REFERENCES builds (id),
  series_key      TEXT NOT NULL,
  profile         TEXT NOT NULL,
  weight_type     TEXT,
  path            TEXT NOT NULL,
  tokens          INTEGER NOT NULL,
  backend         TEXT NOT NULL,
  gpu_name        TEXT NOT NULL,
  build_name      TEXT NOT NULL,                -- the build's, copied so a trend needs no join
  build_sha256    TEXT NOT NULL,
  commit_sha      TEXT NOT NULL,
  first_ms        INTEGER NOT NULL,             -- the first run's start: where the point sits in time
  last_ms         INTEGER NOT NULL,
  runs            INTEGER NOT NULL,             -- every finished run with a tok/s
  contended_runs  INTEGER NOT NULL,             -- of which contended = 1
  unknown_runs    INTEGER NOT NULL,             -- of which contended is NULL
  quiet_runs      INTEGER NOT NULL,
  quiet_median    REAL,
  quiet_low       REAL,
  quiet_high      REAL,
  open_runs       INTEGER NOT NULL,
  open_median     REAL,
  open_low        REAL,
  open_high       REAL,
  all_median      REAL NOT NULL,
  all_low         REAL NOT NULL,
  all_high        REAL NOT NULL
);
-- The trend's filters lead (profile, then weight type), time follows; path and build name ride in
-- the index so rows they reject are never read from the table.
CREATE INDEX trend_rollups_by_profile_type ON trend_rollups (profile, weight_type, first_ms, path, build_name);
CREATE INDEX trend_rollups_by_profile_time ON trend_rollups (profile, first_ms, path, build_name);
CREATE INDEX trend_rollups_by_time ON trend_rollups (first_ms, path, build_name);
-- The write path rewrites one job's rows, or one imported build's.
CREATE INDEX trend_rollups_by_job ON trend_rollups (job_id, build_id);

-- --- Existing runs ---
-- SQLite's alone, as in 0003 (0006 drops this table and its rows anyway).
-- engine: sqlite
-- The same statement the store runs at write time (then kRollupInsert), over every run.
INSERT INTO trend_rollups (job_id, build_id, series_key, profile, weight_type, path, tokens, backend,
                           gpu_name, build_name, build_sha256, commit_sha, first_ms, last_ms, runs,
                           contended_runs, unknown_runs, quiet_runs, quiet_median, quiet_low, quiet_high,
                           open_runs, open_median, open_low, open_high, all_median, all_low, all_high)
WITH ranked AS (
  SELECT COALESCE(r.job_id, 0) AS job_key, r.build_id, r.series_key, r.profile, r.weight_type, r.path,
         r.tokens, r.backend, r.gpu_name, r.started_ms, r.tokens_per_s AS v, r.contended AS c,
         row_number() OVER (PARTITION BY COALESCE(r.job_id, 0), r.build_id, r.series_key, r.profile,
                            r.weight_type, r.path, r.tokens, r.backend, r.gpu_name
                            ORDER BY r.tokens_per_s) AS all_rank,
         row_number() OVER (PARTITION BY COALESCE(r.job_id, 0), r.build_id, r.series_key, r.profile,
                            r.weight_type, r.path, r.tokens, r.backend, r.gpu_name, r.contended IS 0
                            ORDER BY r.tokens_per_s) AS quiet_rank,
         row_number() OVER (PARTITION BY COALESCE(r.job_id, 0), r.build_id, r.series_key, r.profile,
                            r.weight_type, r.path, r.tokens, r.backend, r.gpu_name, r.contended IS NOT 1
                            ORDER BY r.tokens_per_s) AS open_rank
  FROM runs r
  WHERE r.state = 'done' AND r.tokens_per_s IS NOT NULL
),
counted AS (
  SELECT ranked.*,
         count(*) OVER g AS all_n,
         sum(c IS 0) OVER g AS quiet_n,
         sum(c IS NOT 1) OVER g AS open_n
  FROM ranked
  WINDOW g AS (PARTITION BY job_key, build_id, series_key, profile, weight_type, path, tokens, backend, gpu_name)
)
SELECT x.job_key, x.build_id, x.series_key, x.profile, x.weight_type, x.path, x.tokens, x.backend,
       x.gpu_name, b.name, b.sha256, b.commit_sha, x.first_ms, x.last_ms, x.runs, x.contended_runs,
       x.unknown_runs, x.quiet_runs, x.quiet_median, x.quiet_low, x.quiet_high, x.open_runs,
       x.open_median, x.open_low, x.open_high, x.all_median, x.all_low, x.all_high
FROM (
  SELECT job_key, build_id, series_key, profile, weight_type, path, tokens, backend, gpu_name,
         min(started_ms) AS first_ms, max(started_ms) AS last_ms, count(*) AS runs,
         sum(c IS 1) AS contended_runs, sum(c IS NULL) AS unknown_runs,
         sum(c IS 0) AS quiet_runs,
         avg(CASE WHEN c IS 0 AND quiet_rank IN ((quiet_n + 1) / 2, (quiet_n + 2) / 2) THEN v END) AS quiet_median,
         min(CASE WHEN c IS 0 THEN v END) AS quiet_low,
         max(CASE WHEN c IS 0 THEN v END) AS quiet_high,
         sum(c IS NOT 1) AS open_runs,
         avg(CASE WHEN c IS NOT 1 AND open_rank IN ((open_n + 1) / 2, (open_n + 2) / 2) THEN v END) AS open_median,
         min(CASE WHEN c IS NOT 1 THEN v END) AS open_low,
         max(CASE WHEN c IS NOT 1 THEN v END) AS open_high,
         avg(CASE WHEN all_rank IN ((all_n + 1) / 2, (all_n + 2) / 2) THEN v END) AS all_median,
         min(v) AS all_low, max(v) AS all_high
  FROM counted
  GROUP BY job_key, build_id, series_key, profile, weight_type, path, tokens, backend, gpu_name
) x JOIN builds b ON b.id = x.build_id;
-- engine: all
