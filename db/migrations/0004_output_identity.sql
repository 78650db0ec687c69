-- The output-identity check of a job's verdict (VerdictReport.identity): present when the runs
-- produced outputs to compare. first_difference is -1 when every output was identical.
CREATE TABLE verdict_output_identity (
  job_id            INTEGER PRIMARY KEY REFERENCES verdicts (job_id) ON DELETE CASCADE,
  identical         INTEGER NOT NULL,
  compared_runs     INTEGER NOT NULL DEFAULT 0,
  output_length     INTEGER NOT NULL DEFAULT 0,
  first_difference  INTEGER NOT NULL DEFAULT -1,
  unit              TEXT NOT NULL DEFAULT '',    -- token|byte
  detail            TEXT NOT NULL DEFAULT ''
);
