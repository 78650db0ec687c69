// The store's view of the fleet: each daemon's GPUs as it last published them (fleet_gpus), read by
// `qgate device` on any daemon that shares the database (docs/fleet.md).
#include "detail/sql_store_impl.h"

namespace qgate::db::detail {

namespace {

std::string joined_labels(const std::vector<std::string>& labels) {
  std::string out;
  for (const std::string& label : canonical_labels(labels)) out += (out.empty() ? "" : ",") + label;
  return out;
}

std::vector<std::string> split_labels(const std::string& joined) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < joined.size()) {
    const std::size_t comma = joined.find(',', start);
    const std::size_t end = comma == std::string::npos ? joined.size() : comma;
    if (end > start) out.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void SqlStore::publish_gpus(std::span<const FleetGpu> gpus) {
  guarded("publish_gpus", [&] {
    if (claimant_.id.empty()) {
      throw StoreError(StoreErrorKind::InvalidValue, "publish_gpus: the store has no claimant to publish for");
    }
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    {
      ScopedStatement clear(prepared("DELETE FROM fleet_gpus WHERE claimant = ?"));
      bind_all(*clear, claimant_.id);
      clear->exec();
    }
    const std::int64_t now = now_ms();
    for (const FleetGpu& gpu : gpus) {
      ScopedStatement insert(prepared(
          "INSERT INTO fleet_gpus (claimant, ordinal, host, name, uuid, labels, backend, qgate_version, "
          "running_job_id, cotenant_state, cotenant_reason, seen_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      bind_all(*insert, claimant_.id, gpu.ordinal, gpu.host, gpu.name, gpu.uuid, joined_labels(gpu.labels),
               gpu.backend, gpu.qgate_version, gpu.running_job_id, gpu.cotenant_state, gpu.cotenant_reason, now);
      insert->exec();
    }
    transaction.commit();
  });
}

std::vector<FleetGpu> SqlStore::list_fleet_gpus(std::int64_t seen_since_ms) {
  return guarded("list_fleet_gpus", [&] {
    ScopedStatement select(prepared(
        "SELECT claimant, ordinal, host, name, uuid, labels, backend, qgate_version, running_job_id, "
        "cotenant_state, cotenant_reason, seen_ms FROM fleet_gpus WHERE seen_ms >= ? "
        "ORDER BY host, claimant, ordinal"));
    bind_all(*select, seen_since_ms);
    std::vector<FleetGpu> out;
    while (select->step()) {
      FleetGpu gpu;
      gpu.claimant = select->text(0);
      gpu.ordinal = static_cast<int>(select->int64(1));
      gpu.host = select->text(2);
      gpu.name = select->text(3);
      gpu.uuid = select->text(4);
      gpu.labels = split_labels(select->text(5));
      gpu.backend = select->text(6);
      gpu.qgate_version = select->text(7);
      if (!select->is_null(8)) gpu.running_job_id = select->int64(8);
      gpu.cotenant_state = select->text(9);
      gpu.cotenant_reason = select->text(10);
      gpu.seen_ms = select->int64(11);
      out.push_back(std::move(gpu));
    }
    return out;
  });
}

}  // namespace qgate::db::detail
