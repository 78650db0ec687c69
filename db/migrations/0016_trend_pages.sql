-- 0016_trend_pages: QueryTrend answers in pages, each read after a keyset cursor in the answer's
-- own order (docs/trends.md, "Pages"). The trend points are read by (first_ms, id) from a lower
-- bound on first_ms, one index per shape of filter (a profile and a weight type, a profile, none),
-- so that a page walks its own rows and stops at its limit instead of sorting every point of the
-- window. They replace the indexes on last_ms, which served a read that sorted the whole window.
-- Raw runs (qgate export) are read by (started_ms, id); a profile's runs keep runs_by_profile_type
-- and runs_by_profile_time.
DROP INDEX build_rollups_by_profile_type;
DROP INDEX build_rollups_by_profile_time;
DROP INDEX build_rollups_by_time;
CREATE INDEX build_rollups_by_profile_type_first ON build_rollups (profile, weight_type, first_ms, id);
CREATE INDEX build_rollups_by_profile_first ON build_rollups (profile, first_ms, id);
CREATE INDEX build_rollups_by_first ON build_rollups (first_ms, id);
CREATE INDEX runs_by_time ON runs (started_ms, id);
