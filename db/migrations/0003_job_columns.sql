-- 0003_job_columns: one source of truth for a job. Its disposition and the spec facts the daemon
-- reads get columns of their own; the verdict tables hold the whole report (per-type ratios and
-- memory leaks in child tables). Until now the report and the disposition were JSON inside
-- jobs.progress_json, which from here on holds live progress only.
--
-- This migration uses SQLite's JSON functions, once, to move the old JSON into the new columns;
-- a PostgreSQL database has no such rows (it starts empty at version 0), so the moves are SQLite's.

ALTER TABLE jobs ADD COLUMN disposition TEXT NOT NULL DEFAULT 'unspecified';  -- unspecified|ok|crashed|timeout|incorrect|rejected|error|leaked
ALTER TABLE jobs ADD COLUMN disposition_detail TEXT NOT NULL DEFAULT '';
-- The spec's facts (jobs.spec_json stays the spec as submitted).
ALTER TABLE jobs ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;                -- 0 = the daemon's default
ALTER TABLE jobs ADD COLUMN run_order TEXT NOT NULL DEFAULT 'abba';           -- abba|sequential
ALTER TABLE jobs ADD COLUMN timing TEXT NOT NULL DEFAULT 'gemm';              -- gemm|pass
ALTER TABLE jobs ADD COLUMN parity_shapes TEXT NOT NULL DEFAULT 'unspecified'; -- unspecified|standard|quick|none
ALTER TABLE jobs ADD COLUMN path TEXT NOT NULL DEFAULT 'mmq';                 -- mmq|f16
ALTER TABLE jobs ADD COLUMN numerics TEXT NOT NULL DEFAULT '';                -- '' = the build's declaration, qgate|ggml
ALTER TABLE jobs ADD COLUMN wait_for_quiet INTEGER NOT NULL DEFAULT 0;        -- asked for; quiet_only is the live flag
ALTER TABLE jobs ADD COLUMN run_contended_on_expiry INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN remeasure_of INTEGER REFERENCES jobs (id);       -- NULL = not a re-measure
ALTER TABLE jobs ADD COLUMN timeout_s INTEGER NOT NULL DEFAULT 0;             -- 0 = the daemon's default
CREATE INDEX jobs_by_remeasure_of ON jobs (remeasure_of) WHERE remeasure_of IS NOT NULL;

ALTER TABLE verdicts ADD COLUMN p_value REAL;
ALTER TABLE verdicts ADD COLUMN profile TEXT NOT NULL DEFAULT '';
ALTER TABLE verdicts ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE verdicts ADD COLUMN backend TEXT NOT NULL DEFAULT '';
ALTER TABLE verdicts ADD COLUMN parity_passed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE verdicts ADD COLUMN parity_failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE verdicts ADD COLUMN arm_a_label TEXT NOT NULL DEFAULT '';
ALTER TABLE verdicts ADD COLUMN arm_a_runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE verdicts ADD COLUMN arm_b_label TEXT NOT NULL DEFAULT '';
ALTER TABLE verdicts ADD COLUMN arm_b_runs INTEGER NOT NULL DEFAULT 0;

-- One weight type's share of an A/B, in the report's order (position).
CREATE TABLE verdict_type_ratios (
  job_id       INTEGER NOT NULL REFERENCES verdicts (job_id) ON DELETE CASCADE,
  position     INTEGER NOT NULL,
  weight_type  TEXT NOT NULL,
  ratio        REAL,
  ci_low       REAL,
  ci_high      REAL,
  comparison   TEXT NOT NULL,              -- SAME|DIFFERENT|UNKNOWN
  gemm_us_a    REAL,
  gemm_us_b    REAL,
  PRIMARY KEY (job_id, position)
);

-- Memory a build kept, in the report's order.
CREATE TABLE verdict_leaks (
  job_id        INTEGER NOT NULL REFERENCES verdicts (job_id) ON DELETE CASCADE,
  position      INTEGER NOT NULL,
  location      TEXT NOT NULL,             -- "arm A across runs", "arm B at release", "parity sweep"
  device_bytes  INTEGER NOT NULL DEFAULT 0,
  host_bytes    INTEGER NOT NULL DEFAULT 0,
  detail        TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, position)
);

-- --- Existing rows ---
-- SQLite files alone have rows written before this migration (a PostgreSQL database starts empty,
-- migrated from version 0), so the moves below are SQLite's.
-- engine: sqlite

-- The disposition, from {"disposition": "DISPOSITION_OK", "disposition_detail": ...}.
UPDATE jobs
SET disposition = lower(substr(json_extract(progress_json, '$.disposition'), 13)),
    disposition_detail = COALESCE(json_extract(progress_json, '$.disposition_detail'), '')
WHERE json_valid(progress_json)
  AND json_extract(progress_json, '$.disposition') IN
      ('DISPOSITION_OK', 'DISPOSITION_CRASHED', 'DISPOSITION_TIMEOUT', 'DISPOSITION_INCORRECT',
       'DISPOSITION_REJECTED', 'DISPOSITION_ERROR', 'DISPOSITION_LEAKED');

-- The report (protobuf JSON: enum names, int64 as strings, defaults left out). A job finished
-- before verdicts were written with it gets its row now; one that has its row gets the rest.
INSERT OR IGNORE INTO verdicts (job_id, verdict, comparison, ratio, ci_low, ci_high, pairs,
                                contended_pairs, tokens_per_s_a, tokens_per_s_b, reasons, created_ms)
SELECT id,
       CASE json_extract(progress_json, '$.report.verdict')
         WHEN 'VERDICT_PASS' THEN 'PASS' WHEN 'VERDICT_FAIL' THEN 'FAIL' ELSE 'INCONCLUSIVE' END,
       CASE json_extract(progress_json, '$.report.comparison')
         WHEN 'COMPARISON_SAME' THEN 'SAME' WHEN 'COMPARISON_DIFFERENT' THEN 'DIFFERENT' ELSE 'UNKNOWN' END,
       json_extract(progress_json, '$.report.ratio'),
       json_extract(progress_json, '$.report.ci_low'),
       json_extract(progress_json, '$.report.ci_high'),
       COALESCE(json_extract(progress_json, '$.report.pairs'), 0),
       COALESCE(json_extract(progress_json, '$.report.contended_pairs'), 0),
       json_extract(progress_json, '$.report.arm_a.tokens_per_s'),
       json_extract(progress_json, '$.report.arm_b.tokens_per_s'),
       COALESCE(json_extract(progress_json, '$.report.reasons'), '[]'),
       COALESCE(finished_ms, created_ms)
FROM jobs
WHERE json_valid(progress_json) AND json_type(progress_json, '$.report') = 'object';

UPDATE verdicts
SET p_value = json_extract(j.progress_json, '$.report.p_value'),
    profile = COALESCE(json_extract(j.progress_json, '$.report.profile'), ''),
    tokens = COALESCE(CAST(json_extract(j.progress_json, '$.report.tokens') AS INTEGER), 0),
    backend = COALESCE(json_extract(j.progress_json, '$.report.backend'), ''),
    parity_passed = COALESCE(json_extract(j.progress_json, '$.report.parity_passed'), 0),
    parity_failed = COALESCE(json_extract(j.progress_json, '$.report.parity_failed'), 0),
    arm_a_label = COALESCE(json_extract(j.progress_json, '$.report.arm_a.label'), ''),
    arm_a_runs = COALESCE(json_extract(j.progress_json, '$.report.arm_a.runs'), 0),
    arm_b_label = COALESCE(json_extract(j.progress_json, '$.report.arm_b.label'), ''),
    arm_b_runs = COALESCE(json_extract(j.progress_json, '$.report.arm_b.runs'), 0)
FROM jobs j
WHERE j.id = verdicts.job_id AND json_valid(j.progress_json)
  AND json_type(j.progress_json, '$.report') = 'object';

INSERT INTO verdict_type_ratios (job_id, position, weight_type, ratio, ci_low, ci_high, comparison,
                                 gemm_us_a, gemm_us_b)
SELECT j.id, t.key, COALESCE(json_extract(t.value, '$.weight_type'), ''),
       json_extract(t.value, '$.ratio'), json_extract(t.value, '$.ci_low'),
       json_extract(t.value, '$.ci_high'),
       CASE json_extract(t.value, '$.comparison')
         WHEN 'COMPARISON_SAME' THEN 'SAME' WHEN 'COMPARISON_DIFFERENT' THEN 'DIFFERENT' ELSE 'UNKNOWN' END,
       json_extract(t.value, '$.gemm_us_a'), json_extract(t.value, '$.gemm_us_b')
FROM jobs j, json_each(j.progress_json, '$.report.per_type') t
WHERE json_valid(j.progress_json) AND json_type(j.progress_json, '$.report.per_type') = 'array';

-- The progress blob keeps live progress only.
UPDATE jobs SET progress_json = json_remove(progress_json, '$.report', '$.disposition', '$.disposition_detail')
WHERE json_valid(progress_json);

-- The spec's facts, from the spec as it was stored (text forms of order, timing and parity shapes).
UPDATE jobs
SET tokens = COALESCE(CAST(json_extract(spec_json, '$.tokens') AS INTEGER), 0),
    run_order = CASE json_extract(spec_json, '$.order') WHEN 'sequential' THEN 'sequential' ELSE 'abba' END,
    timing = CASE json_extract(spec_json, '$.timing') WHEN 'pass' THEN 'pass' ELSE 'gemm' END,
    parity_shapes = CASE json_extract(spec_json, '$.parity_shapes')
                      WHEN 'standard' THEN 'standard' WHEN 'quick' THEN 'quick' WHEN 'none' THEN 'none'
                      ELSE 'unspecified' END,
    path = CASE json_extract(spec_json, '$.path') WHEN 'f16' THEN 'f16' ELSE 'mmq' END,
    numerics = CASE json_extract(spec_json, '$.numerics')
                 WHEN 'NUMERICS_PROFILE_QGATE' THEN 'qgate' WHEN 'NUMERICS_PROFILE_GGML' THEN 'ggml' ELSE '' END,
    wait_for_quiet = COALESCE(json_extract(spec_json, '$.wait_for_quiet'), 0),
    run_contended_on_expiry = COALESCE(json_extract(spec_json, '$.run_contended_on_expiry'), 0),
    remeasure_of = NULLIF(COALESCE(CAST(json_extract(spec_json, '$.remeasure_of') AS INTEGER), 0), 0),
    timeout_s = COALESCE(CAST(json_extract(spec_json, '$.timeout_s') AS INTEGER), 0)
WHERE json_valid(spec_json);

-- The stored spec, rewritten to the enum names the spec now has, so an old job's spec still parses.
UPDATE jobs SET spec_json = json_set(spec_json, '$.order', 'RUN_ORDER_' || upper(json_extract(spec_json, '$.order')))
WHERE json_valid(spec_json) AND json_extract(spec_json, '$.order') IN ('abba', 'sequential');
UPDATE jobs SET spec_json = json_set(spec_json, '$.timing', 'TIMING_MODE_' || upper(json_extract(spec_json, '$.timing')))
WHERE json_valid(spec_json) AND json_extract(spec_json, '$.timing') IN ('gemm', 'pass');
UPDATE jobs SET spec_json = json_set(spec_json, '$.parity_shapes',
                                     'SHAPE_SET_' || upper(json_extract(spec_json, '$.parity_shapes')))
WHERE json_valid(spec_json) AND json_extract(spec_json, '$.parity_shapes') IN ('standard', 'quick', 'none');
-- engine: all
