// Test support: qgated's store, job runner and one-GPU scheduler, wired as the daemon wires them in a
// temporary data dir on the CPU backend and not started, with a co-tenant sampler that has nothing to
// read; and a queued parity job whose build file is missing. In-process tests build on it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "qgate/cotenant/sampler.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/job_runner.h"
#include "qgate/server/scheduler.h"

namespace qgate::server::testing {

struct NoSampler final : cotenant::Sampler {
  std::optional<cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "in-process test"; }
};

struct SchedulerParts {
  std::filesystem::path root;
  DaemonOptions options;
  std::unique_ptr<db::Store> store;
  EventHub events;
  NoSampler sampler;
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<Scheduler> scheduler;

  /// `name` names the temporary directory ("qgate-<name>-XXXXXX").
  explicit SchedulerParts(const std::string& name, int max_streams = 256) {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("qgate-" + name + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root = tmpl;
    options.backend = "cpu";
    options.data_dir = root.string();
    options.db_path = (root / "qgate.db").string();
    options.max_streams = max_streams;
    db::SqliteOptions so;
    so.path = options.db_path;
    store = db::open_sqlite_store(so);
    runner = std::make_unique<JobRunner>(*store, events, options, sampler);
    scheduler = std::make_unique<Scheduler>(*store, *runner, 0);
  }
  ~SchedulerParts() {
    scheduler.reset();
    runner.reset();
    store.reset();
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  SchedulerParts(const SchedulerParts&) = delete;
  SchedulerParts& operator=(const SchedulerParts&) = delete;

  /// A queued parity job whose build file is missing: a runner ends it FAILED before any worker.
  std::int64_t queue_job_without_its_build(const std::string& build_name, char sha256_digit) {
    db::Build build;
    build.sha256 = std::string(64, sha256_digit);
    build.name = build_name;
    build.size_bytes = 1;
    build.artifact_path = (root / (build_name + ".so")).string();
    db::Job job;
    job.kind = "parity";
    job.build_id = store->insert_build(build).id;
    job.backend = "cpu";
    return store->create_job(job);
  }
};

}  // namespace qgate::server::testing
