// Wires the store, the scheduler and the gRPC server together.
#include "qgate/server/daemon.h"
#include "qgate/server/orphan_reaper.h"
#include "qgate/server/artifact_store.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <mutex>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "qgate/cotenant/device_watch.h"
#include "qgate/cotenant/nvml_sampler.h"
#include "qgate/cotenant/replay.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/worker_cgroups.h"
#include "qgate/common/default_paths.h"
#include "qgate/common/gpu_routing.h"
#include "qgate/dashboards/dashboard_api.h"
#include "qgate/dashboards/dashboard_site.h"
#include "qgate/dashboards/http_server.h"
#include "qgate/server/connection_acceptor.h"
#include "qgate/server/dashboard_service.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/harness_service.h"
#include "qgate/server/health_probe.h"
#include "qgate/server/job_event_log.h"
#include "qgate/server/job_runner.h"
#include "qgate/server/listener_security.h"
#include "qgate/server/metrics_exposition.h"
#include "qgate/server/device_status.h"
#include "qgate/server/lease_keeper.h"
#include "qgate/server/store_outage.h"
#include "qgate/server/unrecorded_jobs.h"
#include "qgate/server/scheduler.h"
#include "qgate/server/served_gpus.h"
#include "qgate/server/worker_process.h"

namespace qgate::server {
namespace {

std::string exe_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

/// Asks a worker to describe the device (qgated itself never creates a CUDA context).
DeviceDescription describe_device(const DaemonOptions& o) {
  DeviceDescription d;
  d.host = o.host_name;
  if (o.backend == "cpu") {
    d.name = "cpu";
    return d;
  }
  try {
    WorkerLaunch launch;
    launch.binary = o.worker_binary;
    launch.args = {"describe", "--backend", o.backend, "--device", std::to_string(o.gpu), "--format", "proto"};
    launch.env = clean_worker_environment({});
    WorkerProcess w(launch);
    v1::WorkerRecord rec;
    if (w.read(&rec, std::chrono::seconds(60)) == ReadEnd::record && rec.has_context()) {
      d.name = rec.context().device_name();
      d.uuid = rec.context().device_uuid();
      d.memory_bytes = rec.context().device_memory_bytes();
      d.driver_version = rec.context().driver_version();
    } else if (rec.has_error()) {
      d.name = "unavailable: " + rec.error().message();
    }
    w.wait_exit(std::chrono::seconds(10));
  } catch (const std::exception& e) {
    d.name = std::string("unavailable: ") + e.what();
  }
  return d;
}

/// The sampler of a daemon that has none (the CPU backend, or --sampler none): every run's
/// co-tenant load is recorded as unavailable, never as quiet.
class NoSampler final : public cotenant::Sampler {
 public:
  explicit NoSampler(std::string why) : why_(std::move(why)) {}
  std::optional<cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return why_; }

 private:
  std::string why_;
};

/// Takes `<data dir>/qgated.lock` (an advisory lock, released by the kernel when this process ends,
/// however it ends) and writes this process's pid in it. A second qgated on the same data dir would
/// take over the socket and leave the first serving no one: it is refused, naming the first.
int lock_data_dir(const std::string& data_dir) {
  const std::string path = data_dir + "/qgated.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    char text[32] = {};
    const ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    if (saved != EWOULDBLOCK) throw std::runtime_error("cannot lock " + path + ": " + std::strerror(saved));
    const std::string holder = n > 0 ? std::string(text, size_t(n)) : std::string("unknown");
    throw std::runtime_error("another qgated (pid " + holder.substr(0, holder.find('\n')) + ") serves the data dir " +
                             data_dir + "; stop it first, or give this one another --data-dir");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size()))
    spdlog::warn("qgated: cannot write its pid to {}", path);
  return fd;
}

/// What starts workers: in a cgroup each (--worker-cgroup), where one can be made.
std::shared_ptr<WorkerLauncher> make_worker_launcher(const DaemonOptions& options) {
  if (options.worker_cgroup == "off") return std::make_shared<ProcessLauncher>();
  std::string why;
  std::shared_ptr<const WorkerCgroups> cgroups = WorkerCgroups::find(&why);
  if (!cgroups) {
    if (options.worker_cgroup == "on") throw std::runtime_error("--worker-cgroup on: no cgroup can be made: " + why);
    spdlog::warn("qgated: workers run without a cgroup ({}): their memory and process counts are bounded by "
                 "rlimits only",
                 why);
    return std::make_shared<ProcessLauncher>();
  }
  if (const int removed = cgroups->remove_left_behind(); removed > 0)
    spdlog::info("qgated: removed {} worker cgroup(s) that daemons killed earlier left behind", removed);
  CgroupLimits limits;
  limits.memory_bytes = options.worker_memory_max > 0 ? options.worker_memory_max
                                                       : int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 2;
  limits.pids = options.worker_pids_max;
  spdlog::info("qgated: each worker runs in a cgroup of its own ({}): memory {} MiB, {} processes", cgroups->describe(),
               limits.memory_bytes >> 20, limits.pids);
  return std::make_shared<ProcessLauncher>(std::move(cgroups), limits);
}

/// This daemon's id as a claimant of jobs: its host and data dir.
std::string claimant_id(const std::string& host, const std::string& data_dir) {
  std::error_code ignored;
  const auto absolute = std::filesystem::weakly_canonical(data_dir, ignored);
  return host + ":" + (absolute.empty() ? data_dir : absolute.string());
}

}  // namespace

struct Daemon::Parts {
  std::unique_ptr<ServedGpus> gpus;  // each GPU's sampler and watch: outlives the runner and schedulers
  std::unique_ptr<db::Store> store;
  DaemonMetrics metrics;  // the scheduler counts into it: declared before the scheduler, so it outlives it
  // Whether the store answers (said once per outage), and the jobs it was lost under: read and
  // written by the runner, the scheduler, the lease keeper and /healthz, so declared before them.
  std::unique_ptr<StoreOutage> store_outage;
  std::unique_ptr<UnrecordedJobs> unrecorded;
  EventHub events;
  std::unique_ptr<JobEventLog> event_log;  // declared after events and before the runner: outlives both publishers
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<LeaseKeeper> leases;  // after the scheduler: stopped and destroyed before it
  std::unique_ptr<HarnessService> service;
  std::unique_ptr<DashboardService> dashboard;
  std::unique_ptr<grpc::Server> server;
  // The plain listener's own accept loop (connection_acceptor.h); TLS listens through gRPC.
  std::unique_ptr<ConnectionAcceptor> acceptor;
  std::string address;
  // The HTTP dashboard (--http): its API calls the RPCs above through an in-process channel; /metrics
  // and /healthz read the daemon's parts (docs/operations.md).
  std::unique_ptr<MetricsExposition> metrics_page;
  std::unique_ptr<HealthProbe> health;
  std::unique_ptr<dashboards::DashboardApi> http_api;
  std::unique_ptr<dashboards::DashboardSite> http_site;
  std::unique_ptr<dashboards::HttpServer> http;
  std::string http_address;
  bool read_only = false;  // started on a database it cannot write: no scheduler, no writes
  struct DataDirLock {  // held for the daemon's life: one qgated per data dir
    int fd = -1;
    ~DataDirLock() {
      if (fd >= 0) close(fd);
    }
  } data_dir_lock;
  std::mutex shutdown_mu;
  bool shut_down = false;
};

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)), parts_(std::make_unique<Parts>()) {
  if (options_.data_dir.empty()) options_.data_dir = paths::default_data_dir();
  if (options_.db_path.empty()) options_.db_path = options_.data_dir + "/qgate.db";
  if (options_.listen.empty()) options_.listen = "unix://" + options_.data_dir + "/qgated.sock";
  options_.listen = paths::to_grpc_target(options_.listen);
  if (options_.worker_binary.empty()) options_.worker_binary = exe_dir() + "/qgate-worker";
  if (options_.backend != "cpu" && options_.backend != "cuda")
    throw std::runtime_error("--backend must be cpu or cuda, got '" + options_.backend + "'");
  if (options_.gpu < 0) throw std::runtime_error("--gpu must be >= 0");
  if (options_.host_name.empty()) options_.host_name = machine_host_name();
  if (auto why = invalid_host_name(options_.host_name)) throw std::runtime_error("--host-name: " + *why);
}

Daemon::~Daemon() { shutdown(); }

void Daemon::start() {
  // Everything qgated creates (socket, database, artifacts, logs) is private to its user.
  umask(077);
  // Every client connection is a descriptor: run with the most the system lets this user have, so
  // a burst of idle connections exhausts nothing at the default soft limit of 1,024
  // (docs/security.md). Workers get their own, lower limit (WorkerLaunch::open_files).
  if (struct rlimit files {}; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) spdlog::warn("qgated: cannot raise its descriptor limit");
  }
  // A worker's descendant that leaves the worker's process group (setsid) becomes our child when
  // its parent dies, and is ended when its worker is reaped (orphan_reaper.h).
  if (std::string why; !OrphanReaper::instance().adopt(&why))
    spdlog::warn("qgated: {}: a process a worker starts in a session of its own may outlive its job", why);
  std::filesystem::create_directories(options_.data_dir);
  parts_->data_dir_lock.fd = lock_data_dir(options_.data_dir);
  if (const int removed = remove_unfinished_builds(options_.data_dir + "/artifacts"); removed > 0)
    spdlog::info("qgated: removed {} unfinished upload or fetch file(s) an earlier life left in {}/artifacts", removed,
                 options_.data_dir);
  if (access(options_.worker_binary.c_str(), X_OK) != 0)
    throw std::runtime_error("qgate-worker not found or not executable at " + options_.worker_binary);
  db::InterruptedJobs interrupted;
  // Why the database cannot be written (empty: it can). SQLite opens a file it cannot write
  // read-only without a word, so the first write is what tells.
  std::string read_only;
  try {
    if (!options_.postgres_address.empty()) {
      db::PostgresOptions po;
      po.address = options_.postgres_address;
      parts_->store = db::open_postgres_store(po);
    } else {
      db::SqliteOptions so;
      so.path = options_.db_path;
      parts_->store = db::open_sqlite_store(so);
    }
  } catch (const db::StoreError& e) {
    if (!options_.postgres_address.empty()) throw;  // the server's own words say why
    // A database that must be migrated first cannot be served read-only.
    if (e.kind() == db::StoreErrorKind::ReadOnly || access(options_.db_path.c_str(), W_OK) != 0)
      throw std::runtime_error("the database " + options_.db_path + " (or its directory) is read-only for uid " +
                               std::to_string(getuid()) + ", and qgated cannot open it without writing (" +
                               e.what() + ")");
    throw;
  }
  // This daemon claims as its host and data dir, the same across its restarts: it takes back its own
  // earlier life's jobs, and leaves other live daemons' on a shared database alone.
  options_.claimant_id = claimant_id(options_.host_name, options_.data_dir);
  options_.fleet = !options_.postgres_address.empty();
  parts_->store->set_claimant({options_.claimant_id, std::int64_t(options_.lease_s) * 1000, options_.host_name});
  try {
    interrupted = parts_->store->requeue_interrupted_jobs(options_.max_daemon_deaths);  // the first write: proves we can
  } catch (const db::StoreError& e) {
    if (e.kind() == db::StoreErrorKind::ReadOnly || access(options_.db_path.c_str(), W_OK) != 0)
      read_only = "the database " + options_.db_path + " (or its directory) is read-only for uid " +
                  std::to_string(getuid()) + " (" + e.what() + ")";
    else if (e.kind() == db::StoreErrorKind::Full || e.kind() == db::StoreErrorKind::Io)
      read_only = "the database " + options_.db_path + " cannot be written: the disk is full or failing (" +
                  e.what() + ")";
    else
      throw;
    // Reads need no write: serve the history, run nothing, and refuse what would write.
    spdlog::error("qgated: {}; it starts read-only: it serves reads, runs no job and refuses every submit, "
                  "cancel, remeasure and import until it is restarted with write access",
                  read_only);
  }
  for (auto id : interrupted.requeued) spdlog::warn("job {} was running when the daemon stopped; re-queued", id);
  for (auto id : interrupted.given_up)
    spdlog::error("job {} was running when the daemon stopped; {} daemons have died under it: CRASHED, not run again",
                  id, options_.max_daemon_deaths);

  std::string sampler_kind = options_.sampler;
  if (sampler_kind == "auto") sampler_kind = !options_.replay_samples_file.empty() ? "replay"
                                             : options_.backend == "cuda"         ? "nvml"
                                                                                  : "none";
  if (sampler_kind != "nvml" && sampler_kind != "replay" && sampler_kind != "none")
    throw std::runtime_error("--sampler must be auto, nvml, replay or none, got '" + options_.sampler + "'");
  if (sampler_kind == "replay" && options_.replay_samples_file.empty())
    throw std::runtime_error("--sampler replay needs --replay-samples FILE");
  auto make_sampler = [&](int ordinal) -> std::unique_ptr<cotenant::Sampler> {
    if (sampler_kind == "nvml") {
      cotenant::NvmlSamplerOptions nvml;
      nvml.device_index = unsigned(ordinal);
      return std::make_unique<cotenant::NvmlSampler>(nvml);
    }
    if (sampler_kind == "replay")
      return std::make_unique<cotenant::ReplaySampler>(cotenant::load_trace(options_.replay_samples_file),
                                                       cotenant::system_clock());
    return std::make_unique<NoSampler>(options_.backend == "cpu" ? "the CPU backend has no GPU to sample"
                                                                 : "sampling turned off (--sampler none)");
  };
  auto describe = [&](int ordinal) {
    DaemonOptions one = options_;
    one.gpu = ordinal;
    DeviceDescription d = describe_device(one);
    spdlog::debug("device {}: {}", ordinal, d.name);
    return d;
  };
  // One queue and one co-tenant sampler per served GPU (docs/two-gpus.md).
  parts_->gpus = std::make_unique<ServedGpus>(options_, describe, make_sampler, sampler_kind);
  options_.served = parts_->gpus->facts();
  options_.gpu = parts_->gpus->first().ordinal;
  const ServedGpu& first = parts_->gpus->first();
  parts_->event_log = std::make_unique<JobEventLog>(parts_->events);
  parts_->store_outage = std::make_unique<StoreOutage>(store_name());
  parts_->unrecorded = std::make_unique<UnrecordedJobs>(options_.max_daemon_deaths);
  parts_->runner =
      std::make_unique<JobRunner>(*parts_->store, parts_->events, options_, *first.sampler,
                                               make_worker_launcher(options_));
  parts_->runner->set_unrecorded_jobs(parts_->unrecorded.get());
  parts_->scheduler = std::make_unique<Scheduler>(*parts_->store, *parts_->runner, parts_->gpus->pool());
  parts_->scheduler->set_store_watch(parts_->store_outage.get(), parts_->unrecorded.get());
  parts_->scheduler->set_quiet_source(first.watch, &parts_->events);
  parts_->scheduler->set_metrics(&parts_->metrics);
  parts_->scheduler->set_labels(options_.labels);
  parts_->service = std::make_unique<HarnessService>(*parts_->store, parts_->events, *parts_->scheduler, options_,
                                                     parts_->gpus->description(first.ordinal));
  parts_->service->set_device_watch(first.watch);
  parts_->service->set_gpus(parts_->gpus.get());
  parts_->service->set_read_only(read_only);
  parts_->read_only = !read_only.empty();

  std::string socket_path;
  if (options_.listen.rfind("unix://", 0) == 0) {
    socket_path = options_.listen.substr(7);
    std::filesystem::remove(socket_path);  // a stale socket from a killed daemon
  }
  // Security: what each address allows, decided before anything listens (listener_security.h).
  const ListenerSecurity grpc_security = listener_security(options_, options_.listen, "--listen");
  const bool tcp = grpc_security.tcp;
  const bool tls = grpc_security.tls;
  const std::string& token = grpc_security.token;
  if (options_.allow_commands && token.empty())
    throw std::runtime_error("--allow-commands needs --auth-token-file: only a client holding the token may submit a command");
  std::optional<ListenerSecurity> http_security;
  if (!options_.http.empty()) {
    if (options_.http.rfind("unix:", 0) == 0) throw std::runtime_error("--http takes host:port, not a unix socket");
    http_security = listener_security(options_, options_.http, "--http");
  }
  parts_->service->set_auth(tcp, token);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({read_secret_file(options_.tls_key_file, "TLS key"),
                                      read_secret_file(options_.tls_cert_file, "TLS certificate")});
    credentials = grpc::SslServerCredentials(ssl);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  // TLS: gRPC's own listener. Plain: qgated's accept loop, which survives descriptor exhaustion.
  if (tls) builder.AddListeningPort(options_.listen, credentials, &port);
  else parts_->acceptor = std::make_unique<ConnectionAcceptor>(options_.listen);
  builder.RegisterService(parts_->service.get());
  parts_->dashboard = std::make_unique<DashboardService>(*parts_->store);
  builder.RegisterService(parts_->dashboard.get());
  builder.SetMaxReceiveMessageSize(8 << 20);
  parts_->server = builder.BuildAndStart();
  if (!parts_->server) throw std::runtime_error("cannot listen on " + options_.listen);
  // grpc.health.v1 (`qgate health`, container and Kubernetes probes): the server as a whole ("") is
  // SERVING from here on, and so is the Harness service by name, until shutdown() begins.
  if (auto* health = parts_->server->GetHealthCheckService())
    health->SetServingStatus(qgate::v1::Harness::service_full_name(), true);
  if (!socket_path.empty()) chmod(socket_path.c_str(), 0600);
  parts_->address = options_.listen;
  if (parts_->acceptor) {
    parts_->address = parts_->acceptor->address();
    parts_->acceptor->start(parts_->server.get());
  } else if (port > 0 && options_.listen.find(":0") != std::string::npos) {
    parts_->address = options_.listen.substr(0, options_.listen.rfind(':')) + ":" + std::to_string(port);
  }
  if (http_security) {
    // The dashboard reads through the same RPCs, in process: the same application layer, the same
    // validation, and whatever token rule gRPC applies to a read (the Authorization header travels).
    parts_->http_api = std::make_unique<dashboards::DashboardApi>(parts_->server->InProcessChannel(grpc::ChannelArguments()));
    dashboards::SiteOptions site;
    site.static_dir = !options_.http_root.empty() ? options_.http_root : exe_dir() + "/../share/qgate/dashboard";
    site.loopback = http_security->loopback;
    parts_->metrics_page = std::make_unique<MetricsExposition>(*parts_->store, options_, *parts_->gpus,
                                                               *parts_->scheduler, parts_->metrics);
    parts_->metrics_page->set_store_outage(parts_->store_outage.get());
    parts_->health = std::make_unique<HealthProbe>(*parts_->store, *parts_->scheduler, read_only);
    parts_->health->set_store_outage(parts_->store_outage.get());
    site.metrics = [page = parts_->metrics_page.get()] { return page->text(); };
    site.health = [probe = parts_->health.get()] { return probe->check(); };
    parts_->http_site = std::make_unique<dashboards::DashboardSite>(*parts_->http_api, site);
    dashboards::HttpServerOptions http;
    http.address = options_.http;
    if (http_security->tls) {
      http.tls_cert_file = options_.tls_cert_file;
      http.tls_key_file = options_.tls_key_file;
    }
    const dashboards::DashboardSite& handler = *parts_->http_site;
    parts_->http = std::make_unique<dashboards::HttpServer>(
        http, [&handler](const dashboards::HttpRequest& request) { return handler.handle(request); });
    parts_->http_address = parts_->http->start();
  }
  parts_->gpus->start();
  if (!parts_->read_only) {
    parts_->scheduler->start();
    Scheduler* scheduler = parts_->scheduler.get();
    LeaseHooks hooks;
    hooks.requeued = [scheduler] { scheduler->notify(); };
    hooks.running = [scheduler] { return scheduler->running_jobs(); };
    hooks.renewed = [scheduler](const db::LeaseRenewal& renewal, const std::vector<int64_t>& running) {
      scheduler->apply_lease_renewal(renewal, running);
    };
    if (options_.fleet) {
      // What `qgate device` on any daemon of the fleet shows of this one's GPUs.
      hooks.gpus = [this] {
        return DeviceStatusReport(*parts_->store, options_, *parts_->gpus, *parts_->scheduler).published(QGATE_VERSION);
      };
    }
    parts_->leases = std::make_unique<LeaseKeeper>(*parts_->store, std::chrono::seconds(options_.lease_s),
                                                   options_.max_daemon_deaths, std::move(hooks));
    parts_->leases->set_store_outage(parts_->store_outage.get());
    parts_->leases->start();
  }
}

void Daemon::wait() {
  if (parts_->server) parts_->server->Wait();
}

void Daemon::shutdown() {
  // Called from the signal thread, from main after wait() and from the destructor: only the
  // first call does the work (two concurrent joins of the scheduler thread would be undefined).
  if (!parts_) return;
  std::lock_guard<std::mutex> lock(parts_->shutdown_mu);
  if (parts_->shut_down) return;
  parts_->shut_down = true;
  if (parts_->http) parts_->http->stop();
  // Health watchers see NOT_SERVING before the server stops answering.
  if (parts_->server)
    if (auto* health = parts_->server->GetHealthCheckService()) health->Shutdown();
  if (parts_->acceptor) parts_->acceptor->stop();
  if (parts_->server) parts_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (parts_->leases) parts_->leases->stop();
  if (parts_->scheduler) parts_->scheduler->stop();
  if (parts_->gpus) parts_->gpus->stop();
  // An orderly stop: its running jobs go back to the queue now, not counted as a daemon death. If
  // the store cannot take the write (a full disk), the next start counts it as one.
  try {
    if (parts_->store && !parts_->read_only)
      for (auto id : parts_->store->requeue_interrupted_jobs(options_.max_daemon_deaths, false).requeued)
        spdlog::info("job {} interrupted by the daemon stopping: queued again", id);
  } catch (const std::exception& e) {
    spdlog::warn("qgated: cannot queue the interrupted jobs again ({}); the next start will", e.what());
  }
}

std::string Daemon::listening_address() const { return parts_->address; }

std::string Daemon::store_name() const {
  return options_.postgres_address.empty() ? options_.db_path : "postgresql";
}

std::string Daemon::dashboard_url() const { return parts_->http_address; }

}  // namespace qgate::server
