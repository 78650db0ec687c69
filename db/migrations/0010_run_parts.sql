-- 0010_run_parts: a job's run can have parts, one per weight type of its profile: the time of that
-- type's GEMMs in the run (gemm_ms) and the tokens per second they alone would give (tokens_per_s).
-- A part is a row of runs like any other (so its weight type makes it a series of its own in trends,
-- compare and change points), pointing at the whole run it was measured in. A job's own listing
-- reads whole runs only (part_of IS NULL). Rows written before this migration are whole runs.
ALTER TABLE runs ADD COLUMN part_of INTEGER REFERENCES runs (id);
CREATE INDEX runs_by_part ON runs (part_of) WHERE part_of IS NOT NULL;
-- A trend point summarises whole runs or one type's parts, never both (part: 1 for parts). The
-- runner fills build_rollups anew after this migration, so every point is keyed by it.
ALTER TABLE build_rollups ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
