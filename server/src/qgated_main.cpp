// qgated: the gate daemon (see daemon.h). Flags map one to one onto DaemonOptions.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <thread>

#include "qgate/common/gpu_list.h"
#include "qgate/common/gpu_routing.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/daemon.h"
#include "qgate/server/daemon_log.h"
#include "qgate_revision.h"

int main(int argc, char** argv) {
  qgate::server::DaemonOptions o;
  CLI::App app{"qgated: runs kernel builds' parity sweeps and A/B gates, keeps every figure in SQLite or PostgreSQL"};
  app.set_version_flag("--version", std::string("qgated ") + QGATE_VERSION + " (" + QGATE_COMMIT + "), database schema " +
                                        std::to_string(qgate::db::schema_version_known()));
  app.add_option("--listen", o.listen, "unix:///path or host:port (default: <data dir>/qgated.sock)");
  app.add_option("--data-dir", o.data_dir, "state directory (default: $QGATE_DATA_DIR or ~/.local/share/qgate)");
  std::string store;
  auto* db_flag = app.add_option("--db", o.db_path, "SQLite database (default: <data dir>/qgate.db)");
  app.add_option("--store", store,
                 "where the history and the queue live: a SQLite file, or a PostgreSQL database shared by a "
                 "fleet (postgresql://user@host/db; what it leaves out comes from PG* variables; docs/fleet.md)")
      ->excludes(db_flag);
  app.add_option("--backend", o.backend, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}))->capture_default_str();
  app.add_option("--gpu", o.gpu, "CUDA device ordinal")->check(CLI::NonNegativeNumber)->capture_default_str();
  std::string gpus;
  app.add_option("--gpus", gpus, "serve several GPUs, one queue and sampler each: 0,1 or all (docs/two-gpus.md)")
      ->excludes("--gpu");
  app.add_option("--cpu-device-names", o.cpu_device_names,
                 "CPU backend with --gpus: the fake devices' names, one each (default cpu)")
      ->delimiter(',');
  app.add_option("--cpu-slowdowns", o.cpu_slowdowns,
                 "CPU backend with --gpus: each fake device's simulated slowdown, one each (tests; default 1)")
      ->delimiter(',')
      ->check(CLI::Range(1.0, 100.0));
  app.add_option("--worker", o.worker_binary, "qgate-worker binary (default: beside qgated)");
  app.add_option("--threads", o.cpu_threads, "CPU backend threads per worker, 0 = all")->capture_default_str();
  app.add_option("--max-upload-bytes", o.max_upload_bytes, "largest build accepted")->capture_default_str();
  app.add_option("--max-queued-jobs", o.max_queued_jobs, "queue bound")->capture_default_str();
  app.add_option("--models-dir", o.models_dirs,
                 "a folder whose GGUF files parity jobs may read (repeatable); without one, no job reads model files")
      ->check(CLI::ExistingDirectory);
  app.add_option("--worker-sandbox", o.worker_sandbox,
                 "the workers' sandbox: auto (Landlock where the kernel has it), on (refuse to run without), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--worker-cgroup", o.worker_cgroup,
                 "a cgroup per worker, killed whole when the worker ends: auto (where one can be made), on "
                 "(refuse to start without), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--worker-memory-max", o.worker_memory_max,
                 "each worker cgroup's memory limit in bytes; 0 = half the host's memory")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--worker-pids-max", o.worker_pids_max, "each worker cgroup's process and thread limit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--label", o.labels,
                 "a label of this daemon, repeatable: it claims only jobs whose labels (qgate submit --label) "
                 "it all carries (docs/fleet.md)")
      ->check([](const std::string& label) { return qgate::invalid_label(label).value_or(""); });
  app.add_option("--host-name", o.host_name,
                 "the host this daemon's runs, claims and GPUs are recorded under (default: the machine's "
                 "hostname; in a container, the node's name, docs/fleet.md)")
      ->check([](const std::string& host) { return qgate::invalid_host_name(host).value_or(""); });
  app.add_option("--lease-s", o.lease_s,
                 "how long this daemon's claim on a running job holds unrenewed: a job whose daemon died goes "
                 "back to the queue this long after (docs/fleet.md)")
      ->check(CLI::Range(2, 3600))
      ->capture_default_str();
  app.add_option("--max-daemon-deaths", o.max_daemon_deaths,
                 "a job whose daemon died under it this many times is CRASHED, not run again")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--max-streams", o.max_streams, "concurrent WatchJob streams; more are refused at once")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--upload-timeout", o.upload_timeout_s,
                 "seconds an upload may take from its first message; a slower one is ended and its place given back")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-uploads", o.max_uploads, "concurrent uploads (submits); more are refused at once")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--run-timeout", o.run_timeout_s, "seconds one timed run may take")->capture_default_str();
  app.add_option("--prepare-timeout", o.prepare_timeout_s, "seconds preparing a profile may take")->capture_default_str();
  app.add_option("--parity-timeout", o.parity_timeout_s, "seconds the parity phase may take")->capture_default_str();
  app.add_option("--job-timeout", o.job_timeout_s, "seconds a whole job may take, unless it sets its own")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--sampler", o.sampler, "co-tenant sampler: auto, nvml, replay or none")
      ->check(CLI::IsMember({"auto", "nvml", "replay", "none"}))->capture_default_str();
  app.add_option("--replay-samples", o.replay_samples_file, "replay this JSON-lines trace of samples (tests, simulations)");
  app.add_option("--record-samples", o.record_samples_file, "append every sample read to this JSON-lines trace");
  app.add_option("--quiet-hold", o.quiet_hold_s, "seconds the GPU must stay quiet before a re-measure starts")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--quiet-max-sm", o.quiet_max_foreign_sm_percent,
                 "a foreign process above this SM% makes the GPU contended")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--http", o.http,
                 "serve the dashboard and its JSON API on this host:port (same token and TLS rules as TCP gRPC)");
  app.add_option("--http-root", o.http_root, "the dashboard's files (default: <qgated's dir>/../share/qgate/dashboard)");
  app.add_option("--auth-token-file", o.auth_token_file, "token that submit and cancel need on TCP (16+ characters)");
  app.add_option("--tls-cert", o.tls_cert_file, "TLS certificate (PEM) for TCP");
  app.add_option("--tls-key", o.tls_key_file, "TLS private key (PEM) for TCP");
  app.add_flag("--insecure", o.insecure, "allow a non-loopback address without TLS and a token");
  app.add_flag("--allow-commands", o.allow_commands,
               "run command jobs (programs the client names), for clients holding the --auth-token-file token");
  app.add_option("--log-level", o.log_level,
                 std::string("one of ") + qgate::server::kLogLevelNames +
                     "; the 'listening on' and 'ready' lines are written at any level")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              qgate::server::parse_log_level(text);
              return "";
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
          },
          "LEVEL"))
      ->capture_default_str();
  app.add_option("--log-file", o.log_file, "also append the log to this file");
  app.add_option("--log-format", o.log_format, "text, or json: one object a line (time, level, logger, msg)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  // Every flag may come from a TOML file under its own name (`backend = "cpu"`, `max-queued-jobs = 64`);
  // a flag on the command line wins; a key that names no flag is an error (docs/operations.md).
  app.set_config("--config", "", "read flags from this TOML file, each under its flag's name without --");
  app.allow_config_extras(false);
  CLI11_PARSE(app, argc, argv);
  (qgate::db::is_postgres_address(store) ? o.postgres_address : o.db_path) = store.empty() ? o.db_path : store;
  o.labels = qgate::canonical_labels(o.labels);
  if (!gpus.empty()) {
    try {
      o.all_gpus = gpus == "all";
      if (!o.all_gpus) o.gpus = qgate::common::parse_gpu_list(gpus);
    } catch (const std::invalid_argument& e) {
      std::cerr << "qgated: --gpus: " << e.what() << "\n";
      return 2;
    }
  }

  // Signals are taken by one thread with sigwait, so shutdown runs outside a signal handler.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    qgate::server::install_daemon_log(qgate::server::parse_log_level(o.log_level), o.log_file,
                                      qgate::server::parse_log_format(o.log_format));
  } catch (const std::exception& e) {
    std::cerr << "qgated: " << e.what() << "\n";
    return 1;
  }
  try {
    qgate::server::Daemon daemon(o);
    daemon.start();
    // Scripts and tests wait for these two lines (and read the address from the first).
    qgate::server::log_always("listening on " + daemon.listening_address() + " (backend " + daemon.options().backend +
                              ", device " + std::to_string(daemon.options().gpu) + ", db " + daemon.store_name() +
                              ")");
    if (!daemon.dashboard_url().empty()) qgate::server::log_always("dashboard on " + daemon.dashboard_url());
    for (const auto& gpu : daemon.options().served)
      spdlog::info("serving GPU {}: {}{}", gpu.ordinal, gpu.name, gpu.uuid.empty() ? "" : " (" + gpu.uuid + ")");
    qgate::server::log_always("ready");
    std::thread signals([&] {
      int sig = 0;
      sigwait(&set, &sig);
      spdlog::info("signal {}, shutting down", sig);
      daemon.shutdown();
    });
    // wait() returns once the signal thread has shut the server down.
    daemon.wait();
    signals.join();
    daemon.shutdown();
    spdlog::info("stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
