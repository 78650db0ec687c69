// Scripted workers for the job runner's phases: no processes and no GPU. A fake answers the worker
// protocol as qgate-worker does (context, prepare, timed runs, release), and its script says which
// run fails, dies, hangs or leaks. Every request is written to a journal the tests read.
#pragma once

#include <set>
#include <cmath>
#include <csignal>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "qgate/server/worker_channel.h"

namespace qgate::server::testing {

/// What the fake workers do. Runs are counted over the whole job (every arm, every worker), from 0.
struct WorkerScript {
  double mmq_tokens_per_s = 1000;  // MINFER_MMQ=1
  double f16_tokens_per_s = 500;   // MINFER_MMQ=0
  std::map<std::string, double> build_tokens_per_s;  // by build path: overrides the two above
  // By MINFER_MMQ value ("1", "0"): each run's GEMMs as weight type -> µs, and tok/s = 1e6 / their sum;
  // overrides the tok/s above (one q4_0 GEMM of 1e6 / tok/s µs otherwise). Noise scales every GEMM.
  std::map<std::string, std::map<std::string, double>> type_us;
  double noise = 0;                // relative sd of each run's tok/s (log-normal)
  int fail_run = -1;               // this run answers CASE_OUTCOME_ERROR
  bool fail_run_loses_context = false;  // ... with a lost CUDA context in qgate_gemm_run
  int die_run = -1;                // the worker dies of SIGSEGV in qgate_gemm_run on this run
  int hang_run = -1;               // this run never answers (the read times out)
  bool fail_every_run = false;
  int64_t device_growth_per_run = 0;  // bytes the build keeps per run
  std::function<void(int run)> on_run;  // called as each run is asked for (e.g. to cancel)
  std::vector<v1::WorkerRecord> parity;  // what a `parity` worker writes, in order
  // The speed of each device (by the worker's --device), multiplying every run's tok/s: a split A/B
  // across two GPUs of different speed. A device not listed runs at 1.
  std::map<std::string, double> device_speed;
};

struct Journal {
  std::vector<std::string> events;    // "launch parity", "launch serve MINFER_MMQ=1", "run MINFER_MMQ=0", ...
  std::vector<std::string> run_arms;  // the MINFER_MMQ (or build path) of each run, in order
  int launches = 0;
  std::set<std::string> frozen;                 // arms (by key) frozen now
  std::vector<std::set<std::string>> frozen_at_run;  // what was frozen when each run was answered
  int runs = 0;
  int kills = 0;
  int releases = 0;
  std::vector<std::string> run_devices;  // the --device of each run's worker, in order
  std::mutex mutex;                      // a split A/B runs two workers at once
};

class FakeWorker final : public WorkerChannel {
 public:
  FakeWorker(const WorkerLaunch& launch, WorkerScript& script, Journal& journal, int pid, std::mt19937_64& rng)
      : script_(script), journal_(journal), pid_(pid), rng_(rng) {
    mode_ = launch.args.empty() ? "" : launch.args[0];
    for (size_t i = 0; i + 1 < launch.args.size(); ++i) {
      if (launch.args[i] == "--build") build_ = launch.args[i + 1];
      if (launch.args[i] == "--device") device_ = launch.args[i + 1];
    }
    auto it = launch.env.find("MINFER_MMQ");
    mmq_ = it != launch.env.end() ? it->second : "";
    key_ = script_.build_tokens_per_s.count(build_) ? build_ : "MINFER_MMQ=" + mmq_;
    journal_.events.push_back("launch " + mode_ + " " + key_);
    ++journal_.launches;
    v1::WorkerRecord context;
    context.mutable_context()->set_host("fake-host");
    context.mutable_context()->set_device_name("Fake GPU");
    if (!device_.empty()) {
      context.mutable_context()->set_device_ordinal(std::stoi(device_));
      context.mutable_context()->set_device_uuid("GPU-fake-" + device_);
    }
    outbox_.push_back(context);
    if (mode_ == "parity") {
      // The judge announces its plan first; a script that brings its own plan keeps it.
      int32_t cases = 0;
      bool planned = false;
      for (const auto& r : script_.parity) {
        cases += r.has_parity() ? 1 : 0;
        planned = planned || r.has_plan();
      }
      if (!planned) {
        v1::WorkerRecord plan;
        plan.mutable_plan()->set_cases(cases);
        outbox_.push_back(plan);
      }
      for (const auto& r : script_.parity) outbox_.push_back(r);
    }
  }

  int pid() const override { return pid_; }
  void freeze_group(bool frozen) override {
    std::lock_guard lock(journal_.mutex);
    if (frozen) journal_.frozen.insert(key_);
    else journal_.frozen.erase(key_);
  }

  bool send(const v1::WorkerRequest& request) override {
    std::lock_guard lock(journal_.mutex);
    if (dead_) return false;
    v1::WorkerRecord out;
    if (request.has_prepare()) {
      auto* p = out.mutable_prepared();
      p->set_profile(request.prepare().profile().name());
      p->set_outcome(v1::CASE_OUTCOME_PASSED);
      p->set_path(mmq_ == "0" ? v1::GEMM_PATH_F16 : v1::GEMM_PATH_MMQ);
      p->mutable_memory_before()->set_device_bytes(device_bytes_);
      p->mutable_memory_before()->set_device_source("nvml-process");
      device_bytes_ += 100 << 20;  // the weights
      p->mutable_memory_after()->set_device_bytes(device_bytes_);
      p->mutable_memory_after()->set_device_source("nvml-process");
      outbox_.push_back(out);
    } else if (request.has_run()) {
      const int run = journal_.runs++;
      journal_.events.push_back("run " + key_);
      journal_.run_arms.push_back(key_);
      journal_.frozen_at_run.push_back(journal_.frozen);
      journal_.run_devices.push_back(device_);
      if (script_.on_run) script_.on_run(run);
      if (run == script_.die_run) {
        dead_ = true;
        signal_ = SIGSEGV;
        return true;
      }
      if (run == script_.hang_run) {
        hung_ = true;
        return true;
      }
      device_bytes_ += script_.device_growth_per_run;
      auto* r = out.mutable_profile_run();
      r->set_run_id(request.run().run_id());
      r->mutable_memory()->set_device_bytes(device_bytes_);
      r->mutable_memory()->set_device_source("nvml-process");
      if (run == script_.fail_run || script_.fail_every_run) {
        r->set_outcome(v1::CASE_OUTCOME_ERROR);
        r->set_message("UNSUPPORTED: the build's kernel failed");
        if (script_.fail_run_loses_context) {
          r->mutable_cuda()->set_error("cudaErrorIllegalAddress");
          r->mutable_cuda()->set_last_build_call("qgate_gemm_run");
          r->mutable_cuda()->set_context_lost(true);
        }
      } else {
        r->set_outcome(v1::CASE_OUTCOME_PASSED);
        double tps = script_.build_tokens_per_s.count(build_) ? script_.build_tokens_per_s.at(build_)
                     : mmq_ == "0"                            ? script_.f16_tokens_per_s
                                                              : script_.mmq_tokens_per_s;
        double scale = 1;  // of the run's speed
        if (script_.noise > 0) scale *= std::exp(std::normal_distribution<double>(0, script_.noise)(rng_));
        if (auto speed = script_.device_speed.find(device_); speed != script_.device_speed.end()) scale *= speed->second;
        std::map<std::string, double> gemms = {{"q4_0", 1e6 / tps}};
        if (auto types = script_.type_us.find(mmq_); types != script_.type_us.end()) gemms = types->second;
        double total_us = 0;
        for (auto& [type, us] : gemms) {
          us /= scale;
          total_us += us;
          auto* g = r->add_gemms();
          g->mutable_gemm()->set_type(type);
          g->mutable_gemm()->set_count(1);
          g->set_median_us(us);
        }
        r->set_tokens_per_s(1e6 / total_us);
        r->set_gemm_ms(total_us / 1000.0);
      }
      outbox_.push_back(out);
    } else if (request.has_shutdown()) {
      ++journal_.releases;
      journal_.events.push_back("shutdown " + key_);
      device_bytes_ -= 100 << 20;
      out.mutable_released()->mutable_memory()->set_device_bytes(device_bytes_);
      out.mutable_released()->mutable_memory()->set_device_source("nvml-process");
      outbox_.push_back(out);
      exited_ = true;
    }
    return true;
  }

  ReadEnd read(v1::WorkerRecord* record, std::chrono::milliseconds) override {
    if (!outbox_.empty()) {
      *record = outbox_.front();
      outbox_.pop_front();
      return ReadEnd::record;
    }
    if (hung_) return ReadEnd::timeout;
    return ReadEnd::eof;
  }

  WorkerExit wait_exit(std::chrono::milliseconds) override {
    if (signal_) return {"signal 11 (Segmentation fault)", signal_, "qgate_gemm_run"};
    return {"exit 0", 0, ""};
  }
  std::string stderr_tail(size_t) const override { return "fake worker stderr"; }
  std::string where_is_it(std::chrono::milliseconds) override { return hung_ ? "qgate_gemm_run" : ""; }
  void kill_group() override {
    ++journal_.kills;
    dead_ = true;
  }

 private:
  WorkerScript& script_;
  Journal& journal_;
  int pid_;
  std::mt19937_64& rng_;
  std::string mode_, build_, mmq_, key_, device_;
  std::deque<v1::WorkerRecord> outbox_;
  int64_t device_bytes_ = 300 << 20;  // the CUDA context
  bool dead_ = false, hung_ = false, exited_ = false;
  int signal_ = 0;
};

class FakeLauncher final : public WorkerLauncher {
 public:
  explicit FakeLauncher(WorkerScript script = {}, uint64_t seed = 1) : script(std::move(script)), rng_(seed) {}
  std::unique_ptr<WorkerChannel> launch(const WorkerLaunch& launch) override {
    int pid = 0;
    {
      std::lock_guard lock(journal.mutex);
      pid = 1000 + journal.launches;
    }
    return std::make_unique<FakeWorker>(launch, script, journal, pid, rng_);
  }
  WorkerScript script;
  Journal journal;

 private:
  std::mt19937_64 rng_;
};

}  // namespace qgate::server::testing
