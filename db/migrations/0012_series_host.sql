-- 0012_series_host: the host whose GPU measured a run is one of its series fields (runs.host, kept
-- since 0001). Runs of one GPU model on two hosts are two series, and a trend point is one host's:
-- build_rollups keys its points on the host too. The runner fills build_rollups anew after this
-- migration, as after every migration that alters the table.
ALTER TABLE build_rollups ADD COLUMN host TEXT NOT NULL DEFAULT '';
