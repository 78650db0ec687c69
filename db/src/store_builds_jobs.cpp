// The store's builds and jobs: uploads stored once by SHA-256, the queue (claim, requeue after
// a daemon's death), job states and endings, and the listings that join a job with its builds and
// verdict.
#include "detail/sql_store_impl.h"

namespace qgate::db::detail {

namespace {

/// The WHERE clause of a JobFilter over the jobs table aliased `alias`, with its parameters bound
/// from index 1 by bind_job_filter in the same order.
std::string job_filter_sql(const JobFilter& filter, std::string_view alias) {
  std::string sql;
  auto add = [&](std::string_view condition) {
    sql += sql.empty() ? " WHERE " : " AND ";
    sql += fmt::format("{}.{}", alias, condition);
  };
  if (filter.state) add("state = ?");
  if (filter.quiet_only) add("quiet_only = ?");
  if (filter.remeasure_of) add("remeasure_of = ?");
  if (filter.host) add("host = ?");
  return sql;
}

/// Binds a JobFilter's parameters from `index` on; returns the next free index.
int bind_job_filter(SqlStatement& statement, const JobFilter& filter, int index) {
  if (filter.state) detail::bind_value(statement, index++, to_string(*filter.state));
  if (filter.quiet_only) detail::bind_value(statement, index++, *filter.quiet_only);
  if (filter.remeasure_of) detail::bind_value(statement, index++, *filter.remeasure_of);
  if (filter.host) detail::bind_value(statement, index++, *filter.host);
  return index;
}

}  // namespace

BuildInsert SqlStore::insert_build(const Build& build) {
  return guarded("insert_build", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    connection_->lock_key("build " + build.sha256);
    if (auto existing = select_build("sha256 = ?", build.sha256)) {
      return BuildInsert{existing->id, false};
    }
    Build row = build;
    row.created_ms = or_now(row.created_ms);
    ScopedStatement insert(prepared(insert_sql(build_record())));
    bind_record(*insert, build_record(), row);
    const RowId id = insert->exec_returning_key();
    transaction.commit();
    return BuildInsert{id, true};
  });
}

std::optional<Build> SqlStore::find_build(RowId id) {
  return guarded("find_build", [&] { return select_build("id = ?", id); });
}

std::optional<Build> SqlStore::find_build_by_sha256(std::string_view sha256) {
  return guarded("find_build_by_sha256", [&] { return select_build("sha256 = ?", sha256); });
}

std::optional<Build> SqlStore::find_latest_build_by_name(std::string_view name) {
  return guarded("find_latest_build_by_name", [&] {
    return select_build("name = ? ORDER BY created_ms DESC, id DESC LIMIT 1", name);
  });
}

std::vector<Build> SqlStore::list_builds(std::optional<std::string_view> name, int limit) {
  return guarded("list_builds", [&] {
    std::vector<Build> out;
    ScopedStatement select(prepared(fmt::format("SELECT {} FROM builds{} ORDER BY created_ms DESC, id DESC LIMIT ?",
                                                build_record().column_list(), name ? " WHERE name = ?" : "")));
    if (name) bind_all(*select, *name, limit);
    else bind_all(*select, limit);
    while (select->step()) out.push_back(read_record(build_record(), *select));
    return out;
  });
}

RowId SqlStore::create_job(const Job& job) {
  return guarded("create_job", [&] {
    // The submit RPC's promise: this commit is synced to stable storage before it returns, so an
    // acknowledged job survives a power cut, not only a daemon crash.
    connection_->make_next_commit_durable();
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    Job row = job;
    row.state = JobState::Queued;
    row.created_ms = or_now(row.created_ms);
    row.started_ms.reset();
    row.finished_ms.reset();
    // The claim matches these spellings (ClaimScope), so they are stored only in them.
    row.gpu_model = normalize_gpu_model(row.gpu_model);
    row.labels = canonical_labels(row.labels);
    row.host.clear();
    row.cancel_requested = false;
    ScopedStatement insert(prepared(insert_sql(job_record())));
    bind_record(*insert, job_record(), row);
    const RowId id = insert->exec_returning_key();
    insert_job_labels(id, row.labels);
    transaction.commit();
    return id;
  });
}

std::optional<Job> SqlStore::find_job(RowId id) {
  return guarded("find_job", [&] { return select_job(id); });
}

bool SqlStore::update_job_state(RowId id, JobState state, std::optional<std::string> error,
                      std::optional<JobState> only_if) {
  return guarded("update_job_state", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    const std::string sql = fmt::format(
        "UPDATE jobs SET state = ?1, error = COALESCE(?2, error), "
        "started_ms = CASE WHEN ?1 = 'running' AND started_ms IS NULL THEN ?3 ELSE started_ms END, "
        "finished_ms = CASE WHEN ?4 = 1 THEN ?3 ELSE finished_ms END "
        "WHERE id = ?5{}",
        only_if ? " AND state = ?6" : "");
    ScopedStatement update(prepared(sql));
    bind_all(*update, to_string(state), error, now_ms(), is_terminal(state), id);
    if (only_if) bind_all_from(*update, 6, to_string(*only_if));
    const int changed = update->exec();
    if (changed == 0 && !job_exists(id)) {
      throw StoreError(StoreErrorKind::NotFound, fmt::format("update_job_state: no job {}", id));
    }
    transaction.commit();
    return changed > 0;
  });
}

void SqlStore::update_job_progress(RowId id, std::string_view progress_json) {
  guarded("update_job_progress", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    ScopedStatement update(prepared("UPDATE jobs SET progress_json = ? WHERE id = ?"));
    bind_all(*update, progress_json, id);
    if (update->exec() == 0) {
      throw StoreError(StoreErrorKind::NotFound,
                       fmt::format("update_job_progress: no job {}", id));
    }
    transaction.commit();
  });
}

bool SqlStore::end_job(RowId id, JobState state, const std::string& error, const JobEnding& ending,
             std::optional<JobState> only_if) {
  return guarded("end_job", [&] {
    if (!is_terminal(state)) {
      throw StoreError(StoreErrorKind::InvalidValue,
                       fmt::format("end_job: {} is not an end state", to_string(state)));
    }
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    const std::string sql = fmt::format(
        "UPDATE jobs SET state = ?, error = ?, finished_ms = ?, disposition = ?, "
        "disposition_detail = ? WHERE id = ?{}",
        only_if ? " AND state = ?" : "");
    ScopedStatement update(prepared(sql));
    bind_all(*update, to_string(state), error, now_ms(), to_string(ending.disposition),
             ending.detail, id);
    if (only_if) bind_all_from(*update, 7, to_string(*only_if));
    const int changed = update->exec();
    if (changed == 0 && !job_exists(id)) {
      throw StoreError(StoreErrorKind::NotFound, fmt::format("end_job: no job {}", id));
    }
    transaction.commit();
    return changed > 0;
  });
}

std::vector<Job> SqlStore::list_jobs(const JobFilter& filter) {
  return guarded("list_jobs", [&] {
    const std::string sql =
        fmt::format("SELECT {} FROM jobs j{} ORDER BY j.created_ms DESC, j.id DESC LIMIT ?",
                    job_record().column_list("j"), job_filter_sql(filter, "j"));
    ScopedStatement select(prepared(sql));
    const int next = bind_job_filter(*select, filter, 1);
    detail::bind_value(*select, next, filter.limit);
    std::vector<Job> jobs;
    while (select->step()) jobs.push_back(read_record(job_record(), *select));
    std::vector<Job*> pointers;
    for (Job& job : jobs) pointers.push_back(&job);
    attach_job_labels(pointers,
                      fmt::format("SELECT j.id FROM jobs j{} ORDER BY j.created_ms DESC, j.id DESC LIMIT ?",
                                  job_filter_sql(filter, "j")),
                      [&](SqlStatement& statement) {
                        const int at = bind_job_filter(statement, filter, 1);
                        detail::bind_value(statement, at, filter.limit);
                      });
    return jobs;
  });
}

std::int64_t SqlStore::count_jobs(const JobFilter& filter) {
  return guarded("count_jobs", [&] {
    ScopedStatement select(
        prepared(fmt::format("SELECT COUNT(*) FROM jobs j{}", job_filter_sql(filter, "j"))));
    bind_job_filter(*select, filter, 1);
    select->step();
    return select->int64(0);
  });
}

std::vector<JobListing> SqlStore::list_job_listings(const JobFilter& filter) {
  return guarded("list_job_listings", [&] {
    // One read transaction, so the three queries see one snapshot.
    SqlTransaction transaction(*connection_, TransactionKind::Read);
    const std::string matching =
        fmt::format("SELECT j.id FROM jobs j{} ORDER BY j.created_ms DESC, j.id DESC LIMIT ?",
                    job_filter_sql(filter, "j"));
    std::vector<JobListing> listings = select_listings(
        fmt::format("j.id IN ({}) ORDER BY j.created_ms DESC, j.id DESC", matching),
        [&](SqlStatement& statement) {
          const int next = bind_job_filter(statement, filter, 1);
          detail::bind_value(statement, next, filter.limit);
        });
    const auto bind_matching = [&](SqlStatement& statement) {
      const int next = bind_job_filter(statement, filter, 1);
      detail::bind_value(statement, next, filter.limit);
    };
    attach_verdict_children(listings, matching, bind_matching);
    std::vector<Job*> jobs;
    for (JobListing& listing : listings) jobs.push_back(&listing.job);
    attach_job_labels(jobs, matching, bind_matching);
    transaction.commit();
    return listings;
  });
}

std::optional<JobListing> SqlStore::find_job_listing(RowId id) {
  return guarded("find_job_listing", [&]() -> std::optional<JobListing> {
    SqlTransaction transaction(*connection_, TransactionKind::Read);
    auto bind_id = [&](SqlStatement& statement) { detail::bind_value(statement, 1, id); };
    std::vector<JobListing> listings = select_listings("j.id = ?", bind_id);
    attach_verdict_children(listings, "SELECT ?", bind_id);
    if (!listings.empty()) attach_job_labels({&listings.front().job}, "SELECT ?", bind_id);
    transaction.commit();
    if (listings.empty()) return std::nullopt;
    return std::move(listings.front());
  });
}

std::optional<Job> SqlStore::claim_next_job(const ClaimScope& scope) {
  return guarded("claim_next_job", [&]() -> std::optional<Job> {
    // A write transaction: SQLite takes the write lock before the SELECT, and PostgreSQL locks the
    // row it picks (skipping rows other claimers hold), so two claimers (threads or daemons sharing
    // the database) never take the same queued job. Each condition is one the scope's GPU and
    // daemon meet (docs/fleet.md): the job's model among the words of the GPU's name (both kept
    // normalized, so the padded LIKE is a whole-word match on both engines), its uuid, its labels
    // all among the daemon's, and no more GPUs than the daemon serves.
    const std::vector<std::string> labels = canonical_labels(scope.labels);
    std::string label_list;
    for (std::size_t i = 0; i < labels.size(); ++i) label_list += i ? ", ?" : "?";
    const std::string sql = fmt::format(
        "SELECT j.id FROM jobs j WHERE j.state = 'queued'{}{} "
        "AND (j.gpu_model = '' OR ? LIKE '% ' || j.gpu_model || ' %') "
        "AND (j.gpu_uuid = '' OR j.gpu_uuid = ?) AND j.gpus_needed <= ? "
        "AND NOT EXISTS (SELECT 1 FROM job_labels l WHERE l.job_id = j.id{}) "
        "ORDER BY j.created_ms, j.id LIMIT 1{}",
        scope.ordinal ? " AND j.device = ?" : "", scope.gpu_quiet ? "" : " AND j.quiet_only = 0",
        labels.empty() ? "" : fmt::format(" AND l.label NOT IN ({})", label_list),
        connection_->claim_lock_clause());
    std::optional<RowId> id;
    {
      SqlTransaction transaction(*connection_, TransactionKind::Write);
      {
        ScopedStatement select(prepared(sql));
        int index = 1;
        if (scope.ordinal) detail::bind_value(*select, index++, *scope.ordinal);
        bind_all_from(*select, index, " " + normalize_gpu_model(scope.gpu_name) + " ", scope.gpu_uuid,
                      scope.gpus_served);
        index += 3;
        for (const std::string& label : labels) detail::bind_value(*select, index++, label);
        if (select->step()) id = select->int64(0);
      }
      if (!id) return std::nullopt;
      ScopedStatement update(prepared(
          "UPDATE jobs SET state = 'running', started_ms = ?, claimed_by = ?, lease_expires_ms = ?, host = ? "
          "WHERE id = ? AND state = 'queued'"));
      const std::int64_t now = now_ms();
      const std::optional<std::int64_t> lease =
          claimant_.id.empty() ? std::nullopt : std::optional<std::int64_t>(now + claimant_.lease_ms);
      bind_all(*update, now, claimant_.id, lease, claimant_.host, *id);
      update->exec();
      auto job = select_job(*id);
      transaction.commit();
      return job;
    }
  });
}

bool SqlStore::request_cancel(RowId id) {
  return guarded("request_cancel", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    ScopedStatement update(prepared("UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state = 'running'"));
    bind_all(*update, id);
    const int changed = update->exec();
    if (changed == 0 && !job_exists(id)) {
      throw StoreError(StoreErrorKind::NotFound, fmt::format("request_cancel: no job {}", id));
    }
    transaction.commit();
    return changed > 0;
  });
}

bool SqlStore::set_job_quiet_only(RowId id, bool quiet_only) {
  return guarded("set_job_quiet_only", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    ScopedStatement update(prepared("UPDATE jobs SET quiet_only = ? WHERE id = ? AND state = 'queued'"));
    bind_all(*update, quiet_only, id);
    const int changed = update->exec();
    if (changed == 0 && !job_exists(id)) {
      throw StoreError(StoreErrorKind::NotFound, fmt::format("set_job_quiet_only: no job {}", id));
    }
    transaction.commit();
    return changed > 0;
  });
}

std::vector<RowId> SqlStore::jobs_with_contended_runs(std::int64_t since_ms) {
  return guarded("jobs_with_contended_runs", [&] {
    std::vector<RowId> ids;
    ScopedStatement select(prepared(
        "SELECT DISTINCT j.id FROM jobs j JOIN runs r ON r.job_id = j.id JOIN cotenant c ON c.run_id = r.id "
        "WHERE j.state = 'done' AND j.created_ms >= ? AND c.contended = 1 ORDER BY j.id"));
    bind_all(*select, since_ms);
    while (select->step()) ids.push_back(select->int64(0));
    return ids;
  });
}

InterruptedJobs SqlStore::requeue_interrupted_jobs(int max_daemon_deaths, bool daemon_died) {
  return guarded("requeue_interrupted_jobs", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    // This daemon's own earlier life's jobs, and those claimed with no claimant (before leases).
    InterruptedJobs out = recover_running_jobs(RecoveredScope{"(claimed_by = ? OR claimed_by = '')", claimant_.id},
                                               max_daemon_deaths, daemon_died);
    transaction.commit();
    return out;
  });
}

InterruptedJobs SqlStore::requeue_expired_leases(int max_daemon_deaths) {
  return guarded("requeue_expired_leases", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    InterruptedJobs out = recover_running_jobs(
        RecoveredScope{"lease_expires_ms IS NOT NULL AND lease_expires_ms < ?", now_ms()}, max_daemon_deaths, true);
    transaction.commit();
    return out;
  });
}

void SqlStore::set_claimant(const Claimant& claimant) {
  std::lock_guard lock(mutex_);
  claimant_ = claimant;
}

LeaseRenewal SqlStore::renew_leases() {
  return guarded("renew_leases", [&]() -> LeaseRenewal {
    LeaseRenewal out;
    if (claimant_.id.empty()) return out;
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    {
      ScopedStatement renew(prepared("UPDATE jobs SET lease_expires_ms = ? WHERE state = 'running' AND claimed_by = ?"));
      bind_all(*renew, now_ms() + claimant_.lease_ms, claimant_.id);
      renew->exec();
    }
    ScopedStatement held(prepared(
        "SELECT id, cancel_requested FROM jobs WHERE state = 'running' AND claimed_by = ? ORDER BY id"));
    bind_all(*held, claimant_.id);
    while (held->step()) {
      out.held.push_back(held->int64(0));
      if (held->int64(1) != 0) out.cancel_requested.push_back(held->int64(0));
    }
    transaction.commit();
    return out;
  });
}

InterruptedJobs SqlStore::recover_running_jobs(const RecoveredScope& scope, int max_daemon_deaths,
                                                bool daemon_died) {
  // Every statement reads "state = 'running' AND <scope>", the scope's value bound last.
  const std::string running = fmt::format("state = 'running' AND {}", scope.condition);
  InterruptedJobs out;
  {
    ScopedStatement select(
        prepared(fmt::format("SELECT id, attempts FROM jobs WHERE {} AND cancel_requested = 0 ORDER BY id", running)));
    bind_all(*select, scope.value);
    while (select->step())
      (daemon_died && select->int64(1) + 1 >= max_daemon_deaths ? out.given_up : out.requeued)
          .push_back(select->int64(0));
  }
  // Their half-done runs would otherwise stay 'running' forever; they are kept (for the record)
  // but marked, and never show in trends.
  ScopedStatement interrupt_runs(prepared(fmt::format(
      "UPDATE runs SET state = 'interrupted', finished_ms = ? "
      "WHERE state = 'running' AND job_id IN (SELECT id FROM jobs WHERE {})",
      running)));
  bind_all(*interrupt_runs, now_ms(), scope.value);
  interrupt_runs->exec();
  // A job someone asked to cancel while its daemon was lost is not run again: it ends cancelled.
  ScopedStatement cancel(prepared(fmt::format(
      "UPDATE jobs SET state = 'cancelled', finished_ms = ?, error = ?, lease_expires_ms = NULL "
      "WHERE {} AND cancel_requested = 1",
      running)));
  bind_all(*cancel, now_ms(), std::string("cancelled while the daemon that ran it was lost"), scope.value);
  cancel->exec();
  if (daemon_died) {
    ScopedStatement give_up(prepared(fmt::format(
        "UPDATE jobs SET state = 'failed', attempts = attempts + 1, finished_ms = ?, disposition = 'crashed', "
        "disposition_detail = ?, error = ?, lease_expires_ms = NULL WHERE {} AND attempts + 1 >= ?",
        running)));
    const std::string why = "the daemon died " + std::to_string(max_daemon_deaths) +
                            " times while this job ran; it is not run again (a build that kills its parent "
                            "would take every restarted daemon down)";
    bind_all(*give_up, now_ms(), why, why, scope.value, max_daemon_deaths);
    give_up->exec();
  }
  ScopedStatement requeue(prepared(fmt::format(
      "UPDATE jobs SET state = 'queued', attempts = attempts + ?, started_ms = NULL, claimed_by = '', "
      "lease_expires_ms = NULL WHERE {}",
      running)));
  bind_all(*requeue, daemon_died ? 1 : 0, scope.value);
  requeue->exec();
  return out;
}

std::optional<Job> SqlStore::select_job(RowId id) {
  ScopedStatement select(prepared(fmt::format("SELECT {} FROM jobs j WHERE j.id = ?", job_record().column_list("j"))));
  bind_all(*select, id);
  if (!select->step()) return std::nullopt;
  Job job = read_record(job_record(), *select);
  attach_job_labels({&job}, "?", [&](SqlStatement& statement) { detail::bind_value(statement, 1, id); });
  return job;
}

void SqlStore::insert_job_labels(RowId job_id, const std::vector<std::string>& labels) {
  for (const std::string& label : labels) {
    ScopedStatement insert(prepared("INSERT INTO job_labels (job_id, label) VALUES (?, ?)"));
    bind_all(*insert, job_id, label);
    insert->exec();
  }
}

bool SqlStore::job_exists(RowId id) {
  ScopedStatement select(prepared("SELECT 1 FROM jobs WHERE id = ?"));
  bind_all(*select, id);
  return select->step();
}

const SqlStore::BuildNaming& SqlStore::build_naming(RowId build_id) {
  if (auto cached = build_namings_.find(build_id); cached != build_namings_.end()) {
    return cached->second;
  }
  const std::optional<Build> build = select_build("id = ?", build_id);
  if (!build) throw StoreError(StoreErrorKind::NotFound, fmt::format("no build {}", build_id));
  return build_namings_.emplace(build_id, BuildNaming{build->name, build_label(build->name, build->sha256)})
      .first->second;
}

const std::string& SqlStore::build_name(RowId build_id) { return build_naming(build_id).name; }

}  // namespace qgate::db::detail
