-- 0011_run_settings: the settings a run was measured with beyond its series' other fields, as
-- "name=value; ..." in a fixed order: for a llama-bench result, the settings llama-bench itself keys
-- a series on (n_batch, n_ubatch, flash_attn, type_k, n_depth, ...; docs/interop.md). '' for
-- qgate's own runs, whose settings are their job's. A run with settings is a series of its own: they
-- are part of its series key, so runs of 4 configurations are 4 series, never one pooled series.
ALTER TABLE runs ADD COLUMN settings TEXT NOT NULL DEFAULT '';
-- A trend point carries its series' settings to show them. The runner fills build_rollups anew
-- after this migration.
ALTER TABLE build_rollups ADD COLUMN settings TEXT NOT NULL DEFAULT '';
