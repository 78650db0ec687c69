// A throwaway PostgreSQL server for tests: finding the binaries, initdb and pg_ctl (as an
// unprivileged user when run as root), and fresh databases over libpq (see test_postgres.h).
#include "test_postgres.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace qgate::test_support {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSuperuser = "qgate";
constexpr const char* kPort = "5432";  // each server has its own socket directory, so one port serves all
constexpr const char* kStartTimeoutSeconds = "60";
constexpr const char* kUnprivilegedUser = "nobody";
constexpr std::size_t kLogTailBytes = 4000;

struct CommandResult {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr together
};

using RunAs = std::optional<std::pair<uid_t, gid_t>>;

std::string read_whole_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

std::string join(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) line += (line.empty() ? "" : " ") + arg;
  return line;
}

// Runs argv[0] (a path) with its output captured, in `cwd`, as `run_as` when set. Only
// async-signal-safe calls between fork and exec: the test process may have threads.
CommandResult run_command(const std::vector<std::string>& argv, const fs::path& cwd, const RunAs& run_as) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string cwd_text = cwd.string();
  FILE* output = std::tmpfile();
  if (!output) throw std::runtime_error("tmpfile failed for the output of " + argv[0]);
  const int output_fd = fileno(output);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid < 0) {
    std::fclose(output);
    if (null_fd >= 0) close(null_fd);
    throw std::runtime_error("fork failed for " + argv[0]);
  }
  if (pid == 0) {
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(output_fd, STDOUT_FILENO) < 0 ||
        dup2(output_fd, STDERR_FILENO) < 0)
      _exit(126);
    // Nothing else of this process reaches the server that pg_ctl leaves running.
    close_range(3, ~0U, 0);
    if (chdir(cwd_text.c_str()) != 0) _exit(126);
    if (run_as && (setgroups(0, nullptr) != 0 || setresgid(run_as->second, run_as->second, run_as->second) != 0 ||
                   setresuid(run_as->first, run_as->first, run_as->first) != 0))
      _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  if (null_fd >= 0) close(null_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fclose(output);
      throw std::runtime_error("waitpid failed for " + argv[0]);
    }
  }
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::rewind(output);
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, output)) > 0) result.output.append(buffer, n);
  std::fclose(output);
  return result;
}

bool holds_server_binaries(const fs::path& dir) {
  return access((dir / "initdb").c_str(), X_OK) == 0 && access((dir / "pg_ctl").c_str(), X_OK) == 0;
}

// `pg_config --bindir`, or "" when pg_config is not on the PATH.
std::string pg_config_bindir() {
  FILE* pipe = popen("pg_config --bindir 2>/dev/null", "r");
  if (!pipe) return "";
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) text += buffer;
  pclose(pipe);
  return trimmed(text);
}

// The highest /usr/lib/postgresql/<version>/bin holding the server binaries, or "".
fs::path highest_debian_bindir() {
  fs::path best;
  double best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string version = entry.path().filename().string();
    char* end = nullptr;
    const double number = std::strtod(version.c_str(), &end);
    if (end == version.c_str() || !holds_server_binaries(entry.path() / "bin")) continue;
    if (number > best_version) {
      best_version = number;
      best = entry.path() / "bin";
    }
  }
  return best;
}

// Who runs initdb and pg_ctl: nobody when this process is root (PostgreSQL refuses root), else
// this process itself.
RunAs unprivileged_user_when_root() {
  if (geteuid() != 0) return std::nullopt;
  const passwd* user = getpwnam(kUnprivilegedUser);
  if (!user || user->pw_uid == 0)
    throw std::runtime_error(std::string("running as root, and PostgreSQL refuses to: no unprivileged user '") +
                             kUnprivilegedUser + "' to run initdb and pg_ctl as");
  return std::make_pair(user->pw_uid, user->pw_gid);
}

// The owner of `dir` when this process is root and someone else owns it (a server started as
// `nobody`), for pg_ctl on a server another process started.
RunAs owner_when_root(const fs::path& dir) {
  struct stat info {};
  if (geteuid() != 0 || stat(dir.c_str(), &info) != 0 || info.st_uid == 0) return std::nullopt;
  return std::make_pair(info.st_uid, info.st_gid);
}

std::string log_tail(const fs::path& server_dir) {
  const std::string log = read_whole_file(server_dir / "log");
  return log.empty() ? "(the server log is empty or unreadable)" : tail(log, kLogTailBytes);
}

std::string command_failure(const std::string& what, const std::vector<std::string>& argv,
                            const CommandResult& result, const fs::path& server_dir) {
  std::string message = what + ": `" + join(argv) + "` exited " + std::to_string(result.exit_code);
  message += "\n--- its output ---\n" + tail(result.output, kLogTailBytes);
  if (!server_dir.empty()) message += "\n--- the tail of " + (server_dir / "log").string() + " ---\n" + log_tail(server_dir);
  return message;
}

std::vector<std::string> pg_ctl_stop_command(const fs::path& bindir, const fs::path& server_dir,
                                             const char* mode = "immediate") {
  return {(bindir / "pg_ctl").string(), "stop", "-w", "-m", mode, "-D", (server_dir / "data").string()};
}

// A connection-string value, quoted when libpq needs it to be.
std::string conninfo_value(const std::string& value) {
  if (!value.empty() && value.find_first_of(" \t\n'\\") == std::string::npos) return value;
  std::string quoted = "'";
  for (const char c : value) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "'";
}

std::string quoted_identifier(const std::string& name) {
  std::string quoted = "\"";
  for (const char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// Runs `sql` on a new connection; the error, or nullopt when it succeeded.
std::optional<std::string> execute(const std::string& conninfo, const std::string& sql) {
  const std::string with_timeout = conninfo + " connect_timeout=10";
  PGconn* conn = PQconnectdb(with_timeout.c_str());
  std::optional<std::string> error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = "cannot connect (" + conninfo + "): " + trimmed(PQerrorMessage(conn));
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK && PQresultStatus(result) != PGRES_TUPLES_OK)
      error = "`" + sql + "` failed: " + trimmed(PQerrorMessage(conn));
    PQclear(result);
  }
  PQfinish(conn);
  return error;
}

std::string unique_database_name() {
  static std::atomic<unsigned long> counter{0};
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return "qgate_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(micros);
}

}  // namespace

std::optional<fs::path> find_postgres_bindir(std::string& why_not) {
  if (const char* env = std::getenv(kPostgresBindirEnv); env && *env) {
    if (holds_server_binaries(env)) return fs::path(env);
    why_not = std::string(kPostgresBindirEnv) + "=" + env + " holds no executable initdb and pg_ctl";
    return std::nullopt;
  }
  if (const std::string dir = pg_config_bindir(); !dir.empty() && holds_server_binaries(dir)) return fs::path(dir);
  if (fs::path dir = highest_debian_bindir(); !dir.empty()) return dir;
  why_not = std::string("no PostgreSQL server binaries (initdb, pg_ctl): ") + kPostgresBindirEnv +
            " is not set, `pg_config --bindir` names none and /usr/lib/postgresql/*/bin holds none "
            "(Debian: apt-get install postgresql; scripts/install-deps.sh does)";
  return std::nullopt;
}

// --- TestDatabase ---

TestDatabase::TestDatabase(std::string name, std::string conninfo, std::string store_address,
                           std::string maintenance_conninfo)
    : name_(std::move(name)),
      conninfo_(std::move(conninfo)),
      store_address_(std::move(store_address)),
      maintenance_conninfo_(std::move(maintenance_conninfo)) {}

TestDatabase::TestDatabase(TestDatabase&& other) noexcept
    : name_(std::move(other.name_)),
      conninfo_(std::move(other.conninfo_)),
      store_address_(std::move(other.store_address_)),
      maintenance_conninfo_(std::exchange(other.maintenance_conninfo_, {})) {}

std::vector<std::vector<std::string>> TestDatabase::query(const std::string& sql) const {
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection(PQconnectdb((conninfo_ + " connect_timeout=10").c_str()),
                                                          &PQfinish);
  if (PQstatus(connection.get()) != CONNECTION_OK)
    throw std::runtime_error("cannot connect (" + conninfo_ + "): " + trimmed(PQerrorMessage(connection.get())));
  std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(connection.get(), sql.c_str()), &PQclear);
  if (PQresultStatus(result.get()) != PGRES_TUPLES_OK)
    throw std::runtime_error("`" + sql + "` failed: " + trimmed(PQresultErrorMessage(result.get())));
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < PQntuples(result.get()); ++r) {
    rows.emplace_back();
    for (int c = 0; c < PQnfields(result.get()); ++c) rows.back().push_back(PQgetvalue(result.get(), r, c));
  }
  return rows;
}

std::string TestDatabase::query_value(const std::string& sql) const {
  const auto rows = query(sql);
  return rows.empty() || rows.front().empty() ? "" : rows.front().front();
}

TestDatabase& TestDatabase::operator=(TestDatabase&& other) noexcept {
  if (this != &other) {
    drop();
    name_ = std::move(other.name_);
    conninfo_ = std::move(other.conninfo_);
    store_address_ = std::move(other.store_address_);
    maintenance_conninfo_ = std::exchange(other.maintenance_conninfo_, {});
  }
  return *this;
}

TestDatabase::~TestDatabase() { drop(); }

void TestDatabase::drop() noexcept {
  if (maintenance_conninfo_.empty()) return;
  try {
    // FORCE ends connections the test left open; a stopped or removed server just leaves it be.
    execute(maintenance_conninfo_, "DROP DATABASE IF EXISTS " + quoted_identifier(name_) + " WITH (FORCE)");
  } catch (...) {
  }
  maintenance_conninfo_.clear();
}

// --- TestPostgres ---

TestPostgres& TestPostgres::for_process() {
  static std::mutex mutex;
  static std::unique_ptr<TestPostgres> instance;  // destroyed at exit: a private server stops then
  const std::lock_guard lock(mutex);
  if (!instance) {
    const char* file = std::getenv(kTestPostgresFileEnv);
    instance = file && *file ? connect_shared(file) : start_private();
  }
  return *instance;
}

std::unique_ptr<TestPostgres> TestPostgres::start_private() {
  std::unique_ptr<TestPostgres> server(new TestPostgres());
  server->private_ = true;
  std::string why_not;
  const auto bindir = find_postgres_bindir(why_not);
  if (!bindir) {
    server->why_unavailable_ = why_not;
    return server;
  }
  server->bindir_ = *bindir;
  server->run_as_ = unprivileged_user_when_root();
  // Under /tmp, not $TMPDIR: the socket's path must stay under 108 bytes.
  std::string dir_template = "/tmp/qgate-pg-XXXXXX";
  if (!mkdtemp(dir_template.data())) throw std::runtime_error("mkdtemp failed for " + dir_template);
  server->server_dir_ = dir_template;
  server->owner_pid_ = getpid();  // from here on the destructor removes the directory
  // Traversable by all (the socket is in it), listable by its owner only.
  if (chmod(dir_template.c_str(), 0711) != 0)
    throw std::runtime_error("chmod failed for " + dir_template);
  if (server->run_as_ && chown(dir_template.c_str(), server->run_as_->first, server->run_as_->second) != 0)
    throw std::runtime_error("chown to " + std::string(kUnprivilegedUser) + " failed for " + dir_template);
  server->host_ = dir_template;
  server->port_ = kPort;
  server->user_ = kSuperuser;
  server->maintenance_db_ = "postgres";

  const std::vector<std::string> initdb = {(server->bindir_ / "initdb").string(),
                                           "--auth=trust",
                                           std::string("--username=") + kSuperuser,
                                           "--no-locale",
                                           "--encoding=UTF8",
                                           "--no-sync",
                                           "-D",
                                           (server->server_dir_ / "data").string()};
  const CommandResult result = run_command(initdb, server->server_dir_, server->run_as_);
  if (result.exit_code != 0) throw std::runtime_error(command_failure("initdb failed", initdb, result, {}));
  server->start();
  return server;
}

std::unique_ptr<TestPostgres> TestPostgres::connect_shared(const fs::path& conninfo_file) {
  std::unique_ptr<TestPostgres> server(new TestPostgres());
  if (!fs::exists(conninfo_file))
    throw std::runtime_error(std::string(kTestPostgresFileEnv) + " names " + conninfo_file.string() +
                             ", which does not exist (the ctest fixture postgres.start writes it)");
  const std::string text = trimmed(read_whole_file(conninfo_file));
  if (text.empty()) throw std::runtime_error(conninfo_file.string() + " holds no connection string");
  if (text.starts_with(kUnavailablePrefix)) {
    server->why_unavailable_ = text.substr(kUnavailablePrefix.size());
    return server;
  }
  char* parse_error = nullptr;
  PQconninfoOption* options = PQconninfoParse(text.c_str(), &parse_error);
  if (!options) {
    const std::string reason = parse_error ? trimmed(parse_error) : "out of memory";
    PQfreemem(parse_error);
    throw std::runtime_error(conninfo_file.string() + " holds no valid connection string: " + reason);
  }
  for (PQconninfoOption* option = options; option->keyword; ++option) {
    if (!option->val) continue;
    const std::string keyword = option->keyword;
    if (keyword == "host") server->host_ = option->val;
    if (keyword == "port") server->port_ = option->val;
    if (keyword == "user") server->user_ = option->val;
    if (keyword == "dbname") server->maintenance_db_ = option->val;
  }
  PQconninfoFree(options);
  if (server->host_.empty() || server->port_.empty() || server->user_.empty())
    throw std::runtime_error(conninfo_file.string() + " must name host, port and user: " + text);
  if (server->maintenance_db_.empty()) server->maintenance_db_ = "postgres";
  server->running_ = true;
  return server;
}

void TestPostgres::stop_released(const fs::path& server_dir) {
  if (!fs::exists(server_dir)) return;
  std::string why_not;
  const auto bindir = find_postgres_bindir(why_not);
  if (!bindir) throw std::runtime_error("cannot stop the server in " + server_dir.string() + ": " + why_not);
  const auto stop = pg_ctl_stop_command(*bindir, server_dir);
  const CommandResult result = run_command(stop, server_dir, owner_when_root(server_dir));
  // pg_ctl fails on a server that is not running (no postmaster.pid), which is fine here.
  if (result.exit_code != 0 && fs::exists(server_dir / "data" / "postmaster.pid"))
    throw std::runtime_error(command_failure("stopping the server failed", stop, result, server_dir));
  fs::remove_all(server_dir);
}

TestPostgres::~TestPostgres() {
  if (!private_ || server_dir_.empty() || owner_pid_ != getpid()) return;
  try {
    if (running_) run_command(pg_ctl_stop_command(bindir_, server_dir_), server_dir_, run_as_);
    std::error_code ec;
    fs::remove_all(server_dir_, ec);
  } catch (...) {
  }
}

TestDatabase TestPostgres::fresh_database() {
  if (!available()) throw std::logic_error("no PostgreSQL server: " + why_unavailable_);
  const std::string name = unique_database_name();
  const std::string maintenance = conninfo(maintenance_db_);
  if (const auto error = execute(maintenance, "CREATE DATABASE " + quoted_identifier(name) + " TEMPLATE template0"))
    throw std::runtime_error("cannot make a test database: " + *error);
  return TestDatabase(name, conninfo(name), "postgresql://" + user_ + "@/" + name + "?host=" + host_ + "&port=" + port_,
                      maintenance);
}

std::string TestPostgres::conninfo(std::string_view dbname) const {
  return "host=" + conninfo_value(host_) + " port=" + conninfo_value(port_) + " user=" + conninfo_value(user_) +
         " dbname=" + conninfo_value(std::string(dbname));
}

void TestPostgres::require_private(const char* what) const {
  if (!private_) throw std::logic_error(std::string("TestPostgres::") + what + " is for private servers only");
  if (!available()) throw std::logic_error(std::string("TestPostgres::") + what + ": " + why_unavailable_);
  if (server_dir_.empty()) throw std::logic_error(std::string("TestPostgres::") + what + " after release()");
}

void TestPostgres::stop(StopMode mode) {
  require_private("stop");
  if (!running_) return;
  const auto stop = pg_ctl_stop_command(bindir_, server_dir_, mode == StopMode::kFast ? "fast" : "immediate");
  const CommandResult result = run_command(stop, server_dir_, run_as_);
  if (result.exit_code != 0) throw std::runtime_error(command_failure("stopping the server failed", stop, result, server_dir_));
  running_ = false;
}

void TestPostgres::start() {
  require_private("start");
  if (running_) return;
  const std::string settings = "-c listen_addresses='' -c unix_socket_directories=" + server_dir_.string() +
                               " -c port=" + port_ +
                               " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                               " -c max_connections=200";
  const std::vector<std::string> start = {(bindir_ / "pg_ctl").string(),
                                          "start",
                                          "-w",
                                          "-t",
                                          kStartTimeoutSeconds,
                                          "-D",
                                          (server_dir_ / "data").string(),
                                          "-l",
                                          (server_dir_ / "log").string(),
                                          "-o",
                                          settings};
  const CommandResult result = run_command(start, server_dir_, run_as_);
  if (result.exit_code != 0) {
    const std::string message = command_failure("the PostgreSQL server did not start", start, result, server_dir_);
    // One that is still coming up (pg_ctl timed out) goes too.
    run_command(pg_ctl_stop_command(bindir_, server_dir_), server_dir_, run_as_);
    throw std::runtime_error(message);
  }
  running_ = true;
}

const fs::path& TestPostgres::server_dir() const {
  require_private("server_dir");
  return server_dir_;
}

fs::path TestPostgres::release() {
  require_private("release");
  return std::exchange(server_dir_, {});
}

}  // namespace qgate::test_support
