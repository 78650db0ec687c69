-- 0001_initial: the first qgate schema (builds, jobs, runs, samples, parity cases, verdicts, co-tenant).
--
-- Written once for both engines: SQLite runs it as it is, PostgreSQL after the translation of
-- db/src/detail/sql_dialect.h (INTEGER to BIGINT, REAL to DOUBLE PRECISION, TEXT to byte-ordered
-- TEXT, a row id to an identity column). Keep to INTEGER / REAL / TEXT, CHECK and REFERENCES; no
-- AUTOINCREMENT, no STRICT/WITHOUT ROWID, no JSON functions; lines only one engine runs go between
-- "-- engine: sqlite" (or "postgresql") and "-- engine: all". Timestamps are INTEGER unix
-- milliseconds (UTC). Enumerations (job state, verdict, ...) are TEXT validated by the C++ layer
-- rather than CHECK constraints, because SQLite cannot alter a CHECK without rebuilding the table and
-- the sets will grow.

-- A kernel build (.so), addressed by its sha256. Several builds may share a name (successive commits).
CREATE TABLE builds (
  id             INTEGER PRIMARY KEY,
  sha256         TEXT NOT NULL UNIQUE,
  name           TEXT NOT NULL,
  commit_sha     TEXT NOT NULL DEFAULT '',
  branch         TEXT NOT NULL DEFAULT '',
  flags          TEXT NOT NULL DEFAULT '',
  size_bytes     INTEGER NOT NULL DEFAULT 0,
  artifact_path  TEXT NOT NULL DEFAULT '',
  abi_version    INTEGER NOT NULL DEFAULT 0,
  build_name     TEXT NOT NULL DEFAULT '',   -- as reported by qgate_build_info()
  build_version  TEXT NOT NULL DEFAULT '',
  external       INTEGER NOT NULL DEFAULT 0, -- 1 = imported (llama-bench, test-backend-ops), not run by qgate
  created_ms     INTEGER NOT NULL
);
CREATE INDEX builds_by_name ON builds (name, created_ms);

-- A unit of work the daemon queues. kind is open-ended ('gate', 'ab', 'parity', later 'engine', ...).
CREATE TABLE jobs (
  id                 INTEGER PRIMARY KEY,
  kind               TEXT NOT NULL,
  state              TEXT NOT NULL,            -- queued|running|done|failed|cancelled|expired
  build_id           INTEGER NOT NULL REFERENCES builds (id),
  baseline_build_id  INTEGER REFERENCES builds (id),
  profile            TEXT NOT NULL DEFAULT '',
  spec_json          TEXT NOT NULL,            -- the full job spec as submitted
  backend            TEXT NOT NULL DEFAULT '',
  device             INTEGER NOT NULL DEFAULT 0,
  quiet_only         INTEGER NOT NULL DEFAULT 0,
  deadline_ms        INTEGER,
  attempts           INTEGER NOT NULL DEFAULT 0,
  error              TEXT,
  created_ms         INTEGER NOT NULL,
  started_ms         INTEGER,
  finished_ms        INTEGER,
  progress_json      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX jobs_by_state ON jobs (state, created_ms);

-- One worker run: one arm of one pair, or one imported result. job_id is NULL for imported runs.
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  job_id          INTEGER REFERENCES jobs (id),
  build_id        INTEGER NOT NULL REFERENCES builds (id),
  arm             TEXT,                         -- 'A'|'B', NULL outside an A/B
  path            TEXT NOT NULL,                -- 'mmq'|'f16'|'cublaslt_f16'|...
  pair_index      INTEGER NOT NULL DEFAULT 0,
  seq             INTEGER NOT NULL DEFAULT 0,
  started_ms      INTEGER NOT NULL,
  finished_ms     INTEGER,
  state           TEXT NOT NULL,                -- running|done|failed|interrupted
  host            TEXT NOT NULL DEFAULT '',
  gpu_name        TEXT NOT NULL DEFAULT '',
  gpu_uuid        TEXT NOT NULL DEFAULT '',
  driver_version  TEXT NOT NULL DEFAULT '',
  cuda_version    TEXT NOT NULL DEFAULT '',
  backend         TEXT NOT NULL DEFAULT '',
  qgate_version   TEXT NOT NULL DEFAULT '',
  options_json    TEXT NOT NULL DEFAULT '{}',
  series_key      TEXT NOT NULL,                -- stable fingerprint, never a clock reading
  profile         TEXT NOT NULL DEFAULT '',
  weight_type     TEXT,
  tokens          INTEGER NOT NULL DEFAULT 0,
  tokens_per_s    REAL,
  gemm_ms         REAL,
  contended       INTEGER                       -- NULL = co-tenant load unknown
);
CREATE INDEX runs_by_series ON runs (series_key, started_ms);
CREATE INDEX runs_by_profile_type ON runs (profile, weight_type, started_ms);
-- For trends over every type of a profile: without it such a query reads the whole profile's history
-- (measured by qgate-store-bench at 1M runs: p99 ~200 ms, against ~10 ms for one type).
CREATE INDEX runs_by_profile_time ON runs (profile, started_ms);
CREATE INDEX runs_by_build ON runs (build_id);
CREATE INDEX runs_by_job ON runs (job_id);

-- Generic per-run metrics, so whole-engine jobs fit without a schema change.
CREATE TABLE samples (
  id      INTEGER PRIMARY KEY,
  run_id  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric  TEXT NOT NULL CHECK (metric <> ''),
  unit    TEXT NOT NULL DEFAULT '',
  value   REAL NOT NULL
);
CREATE INDEX samples_by_run ON samples (run_id);

CREATE TABLE parity_cases (
  id               INTEGER PRIMARY KEY,
  job_id           INTEGER NOT NULL REFERENCES jobs (id),
  build_id         INTEGER NOT NULL REFERENCES builds (id),
  path             TEXT NOT NULL,
  weight_type      TEXT NOT NULL,
  nt               INTEGER NOT NULL,
  od               INTEGER NOT NULL,
  k                INTEGER NOT NULL,
  seed             INTEGER NOT NULL,            -- uint64 stored bit-for-bit as a signed 64-bit integer
  outcome          TEXT NOT NULL,               -- passed|incorrect|error|not_supported|invalid_problem
  reference        TEXT NOT NULL DEFAULT '',
  tolerance        REAL,
  max_abs_diff     REAL,
  nmse             REAL,
  nan_count        INTEGER NOT NULL DEFAULT 0,
  inf_count        INTEGER NOT NULL DEFAULT 0,
  unwritten_count  INTEGER NOT NULL DEFAULT 0,
  message          TEXT NOT NULL DEFAULT '',
  created_ms       INTEGER NOT NULL
);
CREATE INDEX parity_cases_by_job ON parity_cases (job_id);

CREATE TABLE verdicts (
  job_id            INTEGER PRIMARY KEY REFERENCES jobs (id),
  verdict           TEXT NOT NULL,              -- PASS|FAIL|INCONCLUSIVE
  comparison        TEXT NOT NULL,              -- SAME|DIFFERENT|UNKNOWN
  ratio             REAL,
  ci_low            REAL,
  ci_high           REAL,
  pairs             INTEGER NOT NULL DEFAULT 0,
  contended_pairs   INTEGER NOT NULL DEFAULT 0,
  mismatched_pairs  INTEGER NOT NULL DEFAULT 0,
  tokens_per_s_a    REAL,
  tokens_per_s_b    REAL,
  reasons           TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
  created_ms        INTEGER NOT NULL
);

-- Co-tenant load on the GPU during one run (NVML sampler summary).
CREATE TABLE cotenant (
  run_id               INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  available            INTEGER NOT NULL,        -- 0 = NVML not available, figures below are NULL
  sample_period_ms     INTEGER,
  max_foreign_sm       REAL,
  mean_foreign_sm      REAL,
  device_util_mean     REAL,
  top_processes        TEXT NOT NULL DEFAULT '',  -- e.g. 'sglang@96%'
  throttle_reasons     TEXT NOT NULL DEFAULT '',
  min_sm_clock_mhz     INTEGER,
  median_sm_clock_mhz  INTEGER,
  max_sm_clock_mhz     INTEGER,
  temperature_max_c    INTEGER,
  power_max_w          REAL,
  contended            INTEGER,
  policy               TEXT NOT NULL DEFAULT ''
);

-- Per-sample readings, for the dashboard's co-tenant timeline of a run.
CREATE TABLE cotenant_samples (
  id                 INTEGER PRIMARY KEY,
  run_id             INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  t_ms               INTEGER NOT NULL,
  foreign_sm         REAL,
  device_util        REAL,
  sm_clock_mhz       INTEGER,
  throttle_reasons   INTEGER,                   -- NVML clock-event reason bit mask
  foreign_processes  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX cotenant_samples_by_run ON cotenant_samples (run_id);
