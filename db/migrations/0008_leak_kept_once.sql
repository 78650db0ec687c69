-- 0008_leak_kept_once: a memory finding can be memory a build keeps once (a library's pools and
-- handles, level across a second prepare/run/release cycle in the same process) rather than a
-- leak. Such findings are reported on their own line and never make a job LEAKED. Rows written
-- before this migration were all judged leaks.
ALTER TABLE verdict_leaks ADD COLUMN kept_once INTEGER NOT NULL DEFAULT 0;
