// The store's parity cases, verdicts (with their per-type ratios, leaks and output identity)
// and the co-tenant load recorded for each run.
#include "detail/sql_store_impl.h"

namespace qgate::db::detail {

void SqlStore::add_parity_cases(std::span<const ParityCaseRecord> cases) {
  guarded("add_parity_cases", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    const std::int64_t now = now_ms();
    for (const ParityCaseRecord& parity : cases) {
      ParityCaseRecord row = parity;
      if (row.created_ms == 0) row.created_ms = now;
      ScopedStatement insert(prepared(insert_sql(parity_case_record())));
      bind_record(*insert, parity_case_record(), row);
      insert->exec();
    }
    transaction.commit();
  });
}

std::vector<ParityCaseRecord> SqlStore::parity_cases(RowId job_id) {
  return guarded("parity_cases", [&] {
    ScopedStatement select(prepared(
        fmt::format("SELECT {} FROM parity_cases WHERE job_id = ? ORDER BY id", parity_case_record().column_list())));
    bind_all(*select, job_id);
    std::vector<ParityCaseRecord> cases;
    while (select->step()) cases.push_back(read_record(parity_case_record(), *select));
    return cases;
  });
}

void SqlStore::put_verdict(const Verdict& verdict) {
  guarded("put_verdict", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    upsert_verdict(verdict);
    transaction.commit();
  });
}

bool SqlStore::finish_job_with_verdict(const Verdict& verdict, const JobEnding& ending,
                             std::string_view progress_json) {
  return guarded("finish_job_with_verdict", [&] {
    // One transaction: a crash leaves either a running job without a verdict (re-run at the next
    // start) or a done job with its verdict, never a verdict on a job that will run again.
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    // Only the claimant that runs the job writes its verdict: a daemon whose lease ran out while it
    // ran (the job went back to the queue, another may run it now) writes nothing.
    ScopedStatement update(prepared(
        "UPDATE jobs SET state = 'done', progress_json = ?, finished_ms = ?, disposition = ?, "
        "disposition_detail = ?, lease_expires_ms = NULL WHERE id = ? AND state = 'running' "
        "AND (? = '' OR claimed_by = ?)"));
    bind_all(*update, progress_json, now_ms(), to_string(ending.disposition), ending.detail,
             verdict.job_id, claimant_.id, claimant_.id);
    if (update->exec() == 0) {
      if (!job_exists(verdict.job_id))
        throw StoreError(StoreErrorKind::NotFound, fmt::format("finish_job_with_verdict: no job {}", verdict.job_id));
      return false;  // not running any more (cancelled): nothing is written
    }
    upsert_verdict(verdict);
    transaction.commit();
    return true;
  });
}

std::optional<Verdict> SqlStore::find_verdict(RowId job_id) {
  return guarded("find_verdict", [&]() -> std::optional<Verdict> {
    SqlTransaction transaction(*connection_, TransactionKind::Read);
    std::optional<Verdict> verdict;
    {
      ScopedStatement select(
          prepared(fmt::format("SELECT {} FROM verdicts WHERE job_id = ?", verdict_record().column_list())));
      bind_all(*select, job_id);
      if (!select->step()) return std::nullopt;
      verdict = with_labels(read_record(verdict_record(), *select), Labels::Read);
    }
    std::vector<JobListing> one(1);
    one.front().verdict = std::move(verdict);
    attach_verdict_children(one, "SELECT ?", [&](SqlStatement& statement) {
      detail::bind_value(statement, 1, job_id);
    });
    transaction.commit();
    return std::move(one.front().verdict);
  });
}

void SqlStore::put_cotenant(const CotenantSummary& summary,
                  std::span<const CotenantSample> samples) {
  guarded("put_cotenant", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    upsert_cotenant(summary.run_id, summary);
    ScopedStatement clear(prepared("DELETE FROM cotenant_samples WHERE run_id = ?"));
    bind_all(*clear, summary.run_id);
    clear->exec();
    insert_cotenant_samples(summary.run_id, samples);
    // Copied onto the run and its parts so trend queries filter on runs alone, without a join.
    ScopedStatement mark(prepared("UPDATE runs SET contended = ?1 WHERE id = ?2 OR part_of = ?2"));
    bind_all(*mark, summary.contended, summary.run_id);
    mark->exec();
    RollupScopes scopes;
    add_group_of_run(summary.run_id, scopes);
    for (RowId part : part_ids(summary.run_id)) add_group_of_run(part, scopes);
    refresh_rollups(scopes);
    transaction.commit();
  });
}

std::optional<CotenantSummary> SqlStore::find_cotenant(RowId run_id) {
  return guarded("find_cotenant", [&]() -> std::optional<CotenantSummary> {
    ScopedStatement select(prepared(
        fmt::format("SELECT {} FROM cotenant WHERE run_id = ?", cotenant_record().column_list())));
    bind_all(*select, run_id);
    if (!select->step()) return std::nullopt;
    return read_record(cotenant_record(), *select);
  });
}

std::vector<CotenantSample> SqlStore::cotenant_samples(RowId run_id) {
  return guarded("cotenant_samples", [&] {
    ScopedStatement select(prepared(child_select_sql(cotenant_sample_record(), "= ?", "t_ms, id")));
    bind_all(*select, run_id);
    std::vector<CotenantSample> samples;
    while (select->step()) samples.push_back(read_record(cotenant_sample_record(), *select, 1));
    return samples;
  });
}

void SqlStore::upsert_verdict(const Verdict& verdict) {
  // INSERT ... ON CONFLICT DO UPDATE is spelled the same in PostgreSQL.
  {
    Verdict row = with_labels(verdict, Labels::Stored);
    row.created_ms = or_now(row.created_ms);
    ScopedStatement upsert(prepared(upsert_sql(verdict_record())));
    bind_record(*upsert, verdict_record(), row);
    upsert->exec();
  }
  for (const char* table : {"verdict_type_ratios", "verdict_leaks", "verdict_output_identity"}) {
    ScopedStatement clear(prepared(fmt::format("DELETE FROM {} WHERE job_id = ?", table)));
    bind_all(*clear, verdict.job_id);
    clear->exec();
  }
  for (std::size_t position = 0; position < verdict.per_type.size(); ++position) {
    ScopedStatement insert(prepared(child_insert_sql(type_ratio_record())));
    bind_child(*insert, type_ratio_record(), verdict.job_id, std::int64_t(position), verdict.per_type[position]);
    insert->exec();
  }
  for (std::size_t position = 0; position < verdict.leaks.size(); ++position) {
    ScopedStatement insert(prepared(child_insert_sql(leak_record())));
    bind_child(*insert, leak_record(), verdict.job_id, std::int64_t(position), verdict.leaks[position]);
    insert->exec();
  }
  if (const auto& identity = verdict.identity) {
    ScopedStatement insert(prepared(child_insert_sql(output_identity_record())));
    bind_child(*insert, output_identity_record(), verdict.job_id, 0, *identity);
    insert->exec();
  }
}

Verdict SqlStore::with_labels(Verdict verdict, Labels as) {
  for (auto [id, label] : {std::pair{verdict.arm_a_build_id, &verdict.arm_a_label},
                           std::pair{verdict.arm_b_build_id, &verdict.arm_b_label}}) {
    if (!id) continue;
    const std::string& own = build_naming(*id).label;
    if (as == Labels::Stored && *label == own) label->clear();
    if (as == Labels::Read && label->empty()) *label = own;
  }
  return verdict;
}

void SqlStore::upsert_cotenant(RowId run_id, const CotenantSummary& summary) {
  CotenantSummary row = summary;
  row.run_id = run_id;
  ScopedStatement upsert(prepared(upsert_sql(cotenant_record())));
  bind_record(*upsert, cotenant_record(), row);
  upsert->exec();
}

void SqlStore::insert_cotenant_samples(RowId run_id, std::span<const CotenantSample> samples) {
  for (const CotenantSample& sample : samples) {
    ScopedStatement insert(prepared(child_insert_sql(cotenant_sample_record())));
    bind_child(*insert, cotenant_sample_record(), run_id, 0, sample);
    insert->exec();
  }
}

}  // namespace qgate::db::detail
