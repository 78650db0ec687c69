-- 0007_rollup_timing: a trend point keeps one timing. A job times its runs on each GEMM alone
-- (jobs.timing 'gemm') or on whole passes ('pass'), and the two give different tok/s for the same
-- build, so a point that summarised both mixed two measurements. The timing joins a point's key:
-- the job's timing, or '' for runs no job measured (imported results).
--
-- Schema only, as in 0006: the rows are dropped here and recomputed right after this file, in the
-- same transaction, by the store's own statement (kRollupRecompute), which now groups by timing.

DELETE FROM build_rollups;
ALTER TABLE build_rollups ADD COLUMN timing TEXT NOT NULL DEFAULT '';  -- gemm|pass, '' without a job
-- The write path still rewrites one (build, series, tokens, week) group, now of one row per timing.
DROP INDEX build_rollups_by_group;
CREATE INDEX build_rollups_by_group ON build_rollups (build_id, series_key, tokens, week_ms, timing);
