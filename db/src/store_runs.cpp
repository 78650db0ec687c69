// The store's runs: a run's start and finish (with its samples and its per-weight-type parts),
// bulk recording, imports from other tools, and the reads of single runs.
#include <set>

#include "detail/sql_store_impl.h"

namespace qgate::db::detail {

RowId SqlStore::add_run(const Run& run) {
  return guarded("add_run", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    const RowId id = insert_run(run, run.contended);
    refresh_rollups_of_run(id);
    transaction.commit();
    return id;
  });
}

void SqlStore::finish_run(RowId run_id, const RunResult& result, std::span<const Sample> samples) {
  guarded("finish_run", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    // The result may set the token count, which moves the run to another point: both are redone.
    RollupScopes scopes;
    add_group_of_run(run_id, scopes);
    ScopedStatement update(prepared(
        "UPDATE runs SET state = ?, finished_ms = ?, tokens = COALESCE(?, tokens), "
        "tokens_per_s = COALESCE(?, tokens_per_s), gemm_ms = COALESCE(?, gemm_ms), "
        "contended = COALESCE(?, contended) WHERE id = ?"));
    bind_all(*update, to_string(result.state), or_now(result.finished_ms), result.tokens,
             result.tokens_per_s, result.gemm_ms, result.contended, run_id);
    if (update->exec() == 0) {
      throw StoreError(StoreErrorKind::NotFound, fmt::format("finish_run: no run {}", run_id));
    }
    insert_samples(run_id, samples);
    add_group_of_run(run_id, scopes);
    insert_parts(run_id, result.parts, scopes);
    refresh_rollups(scopes);
    transaction.commit();
  });
}

std::vector<RowId> SqlStore::record_runs(std::span<const RunBundle> bundles) {
  return guarded("record_runs", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    std::vector<RowId> ids;
    ids.reserve(bundles.size());
    RollupScopes scopes;
    for (const RunBundle& bundle : bundles) {
      // The co-tenant summary decides the run's contended flag, as put_cotenant does.
      const std::optional<bool> contended =
          bundle.cotenant ? bundle.cotenant->contended : bundle.run.contended;
      const RowId run_id = insert_run(bundle.run, contended, &scopes);
      insert_samples(run_id, bundle.samples);
      if (bundle.cotenant) {
        upsert_cotenant(run_id, *bundle.cotenant);
        insert_cotenant_samples(run_id, bundle.cotenant_samples);
      }
      ids.push_back(run_id);
    }
    refresh_rollups(scopes);
    transaction.commit();
    return ids;
  });
}

ImportOutcome SqlStore::import_external(const ExternalImport& batch) {
  return guarded("import_external", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    ImportOutcome outcome;
    RollupScopes scopes;
    for (const Build& build : batch.builds) {
      connection_->lock_key("build " + build.sha256);
      if (auto existing = select_build("sha256 = ?", build.sha256)) {
        outcome.build_ids.push_back(existing->id);
        continue;
      }
      Build row = build;
      row.created_ms = or_now(row.created_ms);
      ScopedStatement insert(prepared(insert_sql(build_record())));
      bind_record(*insert, build_record(), row);
      outcome.build_ids.push_back(insert->exec_returning_key());
      ++outcome.builds_added;
    }
    for (const ImportedRun& imported : batch.runs) {
      if (imported.build_index >= outcome.build_ids.size()) {
        throw StoreError(StoreErrorKind::Constraint,
                         fmt::format("imported run names build {} of {}", imported.build_index,
                                     outcome.build_ids.size()));
      }
      Run run = imported.bundle.run;
      run.build_id = outcome.build_ids[imported.build_index];
      ScopedStatement same(prepared(
          "SELECT 1 FROM runs WHERE job_id IS NULL AND build_id = ? AND started_ms = ? AND profile = ? "
          "AND path = ? AND tokens = ? AND tokens_per_s IS NOT DISTINCT FROM ? LIMIT 1"));
      bind_all(*same, run.build_id, run.started_ms, run.profile, run.path, run.tokens, run.tokens_per_s);
      if (same->step()) {
        ++outcome.runs_already_stored;
        continue;
      }
      const RowId run_id = insert_run(run, run.contended, &scopes);
      insert_samples(run_id, imported.bundle.samples);
      outcome.run_ids.push_back(run_id);
    }
    for (const ImportedChecks& checks : batch.checks) import_checks(checks, outcome);
    refresh_rollups(scopes);
    transaction.commit();
    return outcome;
  });
}

void SqlStore::import_checks(const ImportedChecks& checks, ImportOutcome& outcome) {
  if (checks.build_index >= outcome.build_ids.size()) {
    throw StoreError(StoreErrorKind::Constraint, fmt::format("imported checks name build {} of {}",
                                                             checks.build_index, outcome.build_ids.size()));
  }
  Job job = checks.job;
  job.build_id = outcome.build_ids[checks.build_index];
  job.created_ms = or_now(job.created_ms);
  // The same build's checks of the same time and tool were imported before: one job, never two.
  ScopedStatement same(prepared(
      "SELECT 1 FROM jobs WHERE build_id = ? AND kind = ? AND profile = ? AND created_ms = ? LIMIT 1"));
  bind_all(*same, job.build_id, job.kind, job.profile, job.created_ms);
  if (same->step()) {
    outcome.check_jobs.emplace_back();
    return;
  }
  // A finished job from the start: the scheduler never sees it queued.
  job.state = JobState::Done;
  job.started_ms = job.created_ms;
  job.finished_ms = job.created_ms;
  ScopedStatement insert(prepared(insert_sql(job_record())));
  bind_record(*insert, job_record(), job);
  const RowId job_id = insert->exec_returning_key();
  for (const ParityCaseRecord& parity : checks.cases) {
    ParityCaseRecord row = parity;
    row.job_id = job_id;
    row.build_id = job.build_id;
    if (row.created_ms == 0) row.created_ms = job.created_ms;
    ScopedStatement insert_case(prepared(insert_sql(parity_case_record())));
    bind_record(*insert_case, parity_case_record(), row);
    insert_case->exec();
  }
  Verdict verdict = checks.verdict;
  verdict.job_id = job_id;
  if (verdict.created_ms == 0) verdict.created_ms = job.created_ms;
  upsert_verdict(verdict);
  outcome.check_jobs.emplace_back(job_id);
}

std::optional<Run> SqlStore::find_run(RowId id) {
  return guarded("find_run", [&]() -> std::optional<Run> {
    ScopedStatement select(prepared(fmt::format("SELECT {} FROM runs WHERE id = ?", run_record().column_list())));
    bind_all(*select, id);
    if (!select->step()) return std::nullopt;
    return read_record(run_record(), *select);
  });
}

std::vector<Sample> SqlStore::run_samples(RowId run_id) {
  return guarded("run_samples", [&] {
    ScopedStatement select(prepared(child_select_sql(sample_record(), "= ?")));
    bind_all(*select, run_id);
    std::vector<Sample> samples;
    while (select->step()) samples.push_back(read_record(sample_record(), *select, 1));
    return samples;
  });
}

std::int64_t SqlStore::count_runs(std::optional<RowId> job_id) {
  return guarded("count_runs", [&] {
    ScopedStatement select(prepared(job_id ? "SELECT COUNT(*) FROM runs WHERE job_id = ? AND part_of IS NULL"
                                           : "SELECT COUNT(*) FROM runs"));
    if (job_id) bind_all(*select, *job_id);
    select->step();
    return select->int64(0);
  });
}

void SqlStore::insert_parts(RowId run_id, std::span<const RunPart> parts, RollupScopes& scopes) {
  for (RowId old : part_ids(run_id)) add_group_of_run(old, scopes);
  ScopedStatement clear(prepared("DELETE FROM runs WHERE part_of = ?"));
  bind_all(*clear, run_id);
  clear->exec();
  if (parts.empty()) return;
  ScopedStatement select(prepared(fmt::format("SELECT {} FROM runs WHERE id = ?", run_record().column_list())));
  bind_all(*select, run_id);
  if (!select->step()) return;
  const Run whole = read_record(run_record(), *select);
  for (const RunPart& part : parts) {
    Run row = whole;
    row.id = 0;
    row.part_of = run_id;
    row.series_key.clear();
    row.weight_type = part.weight_type;
    row.gemm_ms = part.gemm_ms;
    row.tokens_per_s = part.tokens_per_s;
    insert_run(row, whole.contended, &scopes);
  }
}

std::vector<RowId> SqlStore::part_ids(RowId run_id) {
  ScopedStatement select(prepared("SELECT id FROM runs WHERE part_of = ?"));
  bind_all(*select, run_id);
  std::vector<RowId> ids;
  while (select->step()) ids.push_back(select->int64(0));
  return ids;
}

RowId SqlStore::insert_run(const Run& run, std::optional<bool> contended, RollupScopes* scopes) {
  const std::string series_key =
      run.series_key.empty() ? make_series_key(build_name(run.build_id), run) : run.series_key;
  Run row = run;
  row.started_ms = or_now(row.started_ms);
  row.series_key = series_key;
  row.contended = contended;
  ScopedStatement insert(prepared(insert_sql(run_record())));
  bind_record(*insert, run_record(), row);
  const RowId id = insert->exec_returning_key();
  if (scopes) add_group_of_run(id, *scopes);
  return id;
}

void SqlStore::insert_samples(RowId run_id, std::span<const Sample> samples) {
  for (const Sample& sample : samples) {
    ScopedStatement insert(prepared(child_insert_sql(sample_record())));
    bind_child(*insert, sample_record(), run_id, 0, sample);
    insert->exec();
  }
}

}  // namespace qgate::db::detail
