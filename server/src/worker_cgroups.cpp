// WorkerCgroups: finds a writable cgroup hierarchy under qgated's own cgroup and makes one cgroup
// per worker, with its limits; WorkerCgroup joins, kills and removes it.
#include "qgate/server/worker_cgroups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace qgate::server {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Writes `text` to a cgroup file; "" on success, else why not.
std::string write_text(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  return n == ssize_t(text.size()) ? "" : path + ": " + std::strerror(saved);
}

/// A cgroup mount: where it is mounted, the cgroup path it shows at its root, and its controllers
/// (v1) or "cgroup2".
struct CgroupMount {
  std::string mount_point;
  std::string root;
  std::set<std::string> controllers;
  bool unified = false;
};

std::vector<CgroupMount> cgroup_mounts() {
  std::vector<CgroupMount> mounts;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, mount_point, options, word;
    fields >> id >> parent >> device >> root >> mount_point >> options;
    while (fields >> word && word != "-") {
    }
    std::string type, source, super_options;
    fields >> type >> source >> super_options;
    if (type != "cgroup" && type != "cgroup2") continue;
    CgroupMount m{mount_point, root, {}, type == "cgroup2"};
    std::stringstream opts(super_options);
    for (std::string o; std::getline(opts, o, ',');) m.controllers.insert(o);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

/// This process's cgroup on each hierarchy: "" for the unified one, else each v1 controller.
std::map<std::string, std::string> own_cgroups() {
  std::map<std::string, std::string> own;
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) own[""] = path;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) own[c] = path;
  }
  return own;
}

/// The folder of cgroup `path` on `mount`, or "" when the mount does not show it.
std::string folder_of(const CgroupMount& mount, const std::string& path) {
  if (mount.root == "/") return mount.mount_point + (path == "/" ? "" : path);
  if (path.compare(0, mount.root.size(), mount.root) != 0) return "";
  return mount.mount_point + path.substr(mount.root.size());
}

bool has_words(const std::string& text, std::initializer_list<const char*> words) {
  std::istringstream list(text);
  std::set<std::string> present;
  for (std::string w; list >> w;) present.insert(w);
  for (const char* w : words)
    if (!present.count(w)) return false;
  return true;
}

/// The unified hierarchy: a parent under qgated's own cgroup whose children get memory and pids.
/// qgated moves itself into a leaf (`<own>/qgated`) first, as cgroup v2 allows no process in a
/// cgroup that hands controllers to its children.
std::string unified_parent(const std::vector<CgroupMount>& mounts, const std::map<std::string, std::string>& own,
                           std::string* why) {
  auto own_path = own.find("");
  const CgroupMount* unified = nullptr;
  for (const auto& m : mounts)
    if (m.unified) unified = &m;
  if (own_path == own.end() || !unified) {
    *why = "no cgroup v2 hierarchy";
    return "";
  }
  std::string dir = folder_of(*unified, own_path->second);
  if (dir.empty() || !fs::exists(dir)) {
    *why = "qgated's cgroup v2 folder is not visible";
    return "";
  }
  if (!has_words(read_text(dir + "/cgroup.controllers"), {"memory", "pids"})) {
    *why = "cgroup v2 at " + dir + " has no memory and pids controllers to delegate";
    return "";
  }
  // Already the parent of qgated's leaf (a restart in the same cgroup): use it as it is.
  if (fs::path(dir).filename() == "qgated" && fs::exists(fs::path(dir).parent_path() / "cgroup.subtree_control"))
    dir = fs::path(dir).parent_path().string();
  if (!has_words(read_text(dir + "/cgroup.subtree_control"), {"memory", "pids"})) {
    std::error_code ec;
    fs::create_directory(dir + "/qgated", ec);
    if (std::string e = write_text(dir + "/qgated/cgroup.procs", "0"); !e.empty()) {
      *why = "cannot move qgated into " + e;
      return "";
    }
    if (std::string e = write_text(dir + "/cgroup.subtree_control", "+memory +pids"); !e.empty()) {
      *why = "cannot delegate memory and pids: " + e;
      return "";
    }
  }
  return dir;
}

/// The v1 memory and pids cgroups of qgated, both writable, or empty.
std::vector<std::string> v1_parents(const std::vector<CgroupMount>& mounts,
                                    const std::map<std::string, std::string>& own, std::string* why) {
  std::vector<std::string> parents;
  for (const char* controller : {"memory", "pids"}) {
    const CgroupMount* found = nullptr;
    for (const auto& m : mounts)
      if (!m.unified && m.controllers.count(controller)) found = &m;
    auto path = own.find(controller);
    if (!found || path == own.end()) {
      *why += std::string(why->empty() ? "" : "; ") + "no cgroup v1 " + controller + " hierarchy";
      return {};
    }
    const std::string dir = folder_of(*found, path->second);
    if (dir.empty() || access(dir.c_str(), W_OK) != 0) {
      *why += std::string(why->empty() ? "" : "; ") + "cgroup v1 " + controller + " at " +
              (dir.empty() ? found->mount_point : dir) + " is not writable";
      return {};
    }
    parents.push_back(dir);
  }
  return parents;
}

}  // namespace

WorkerCgroup::WorkerCgroup(std::vector<std::string> dirs, bool unified) : dirs_(std::move(dirs)), unified_(unified) {
  for (const auto& dir : dirs_) {
    const int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const std::string why = dir + "/cgroup.procs: " + std::strerror(errno);
      for (int open_fd : procs_fds_) close(open_fd);
      throw std::runtime_error("cannot open " + why);
    }
    procs_fds_.push_back(fd);
  }
}

WorkerCgroup::~WorkerCgroup() {
  kill_all();
  for (int fd : procs_fds_) close(fd);
  for (const auto& dir : dirs_) rmdir(dir.c_str());
}

bool WorkerCgroup::join_from_child() const {
  // No allocation after fork: the pid is formatted by hand.
  char text[24];
  int n = 0;
  for (pid_t pid = getpid(); pid > 0 && n < int(sizeof text); pid /= 10) text[n++] = char('0' + pid % 10);
  for (int i = 0; i < n / 2; ++i) std::swap(text[i], text[n - 1 - i]);
  bool ok = true;
  for (int fd : procs_fds_) ok = write(fd, text, size_t(n)) == n && ok;
  return ok;
}

std::vector<pid_t> WorkerCgroup::processes() const {
  std::vector<pid_t> pids;
  if (dirs_.empty()) return pids;
  // v1: the pids cgroup holds every process as the memory one does; v2: the one cgroup.
  std::istringstream list(read_text(dirs_.back() + "/cgroup.procs"));
  for (pid_t pid; list >> pid;) pids.push_back(pid);
  return pids;
}

void WorkerCgroup::kill_all() {
  if (dirs_.empty()) return;
  const bool can_kill_at_once = unified_ && fs::exists(dirs_.front() + "/cgroup.kill");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (true) {
    const std::vector<pid_t> left = processes();
    if (left.empty() || std::chrono::steady_clock::now() > deadline) return;
    if (can_kill_at_once) write_text(dirs_.front() + "/cgroup.kill", "1");
    else
      for (pid_t pid : left) ::kill(pid, SIGKILL);  // a fork between the read and the kill: next round
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool WorkerCgroup::memory_limit_killed() const {
  if (dirs_.empty()) return false;
  std::istringstream events(read_text(dirs_.front() + (unified_ ? "/memory.events" : "/memory.oom_control")));
  for (std::string key; events >> key;) {
    int64_t value = 0;
    events >> value;
    if (key == "oom_kill" && value > 0) return true;
  }
  return false;
}

std::unique_ptr<WorkerCgroups> WorkerCgroups::find(std::string* why) {
  const auto mounts = cgroup_mounts();
  const auto own = own_cgroups();
  std::string unified_why, v1_why;
  if (std::string parent = unified_parent(mounts, own, &unified_why); !parent.empty())
    return std::unique_ptr<WorkerCgroups>(new WorkerCgroups({parent}, true));
  if (auto parents = v1_parents(mounts, own, &v1_why); !parents.empty())
    return std::unique_ptr<WorkerCgroups>(new WorkerCgroups(std::move(parents), false));
  *why = unified_why + "; " + v1_why;
  return nullptr;
}

std::unique_ptr<WorkerCgroup> WorkerCgroups::make(const std::string& name, const CgroupLimits& limits) const {
  std::vector<std::string> dirs;
  auto give_up = [&](const std::string& what) {
    for (const auto& dir : dirs) rmdir(dir.c_str());
    throw std::runtime_error("worker cgroup: " + what);
  };
  for (const auto& parent : parents_) {
    const std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) give_up(dir + ": " + std::strerror(errno));
    dirs.push_back(dir);
  }
  const std::string memory_file = unified_ ? "/memory.max" : "/memory.limit_in_bytes";
  const std::string& memory_dir = dirs.front();
  const std::string& pids_dir = dirs.back();
  if (limits.memory_bytes > 0)
    if (std::string e = write_text(memory_dir + memory_file, std::to_string(limits.memory_bytes)); !e.empty())
      give_up(e);
  if (unified_ && limits.memory_bytes > 0) write_text(memory_dir + "/memory.swap.max", "0");  // no escape to swap
  if (limits.pids > 0)
    if (std::string e = write_text(pids_dir + "/pids.max", std::to_string(limits.pids)); !e.empty()) give_up(e);
  return std::make_unique<WorkerCgroup>(std::move(dirs), unified_);
}

int WorkerCgroups::remove_left_behind() const {
  int removed = 0;
  std::error_code ec;
  for (const auto& parent : parents_)
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory(ec) || name.rfind("worker-", 0) != 0) continue;
      const pid_t daemon = pid_t(std::atol(name.c_str() + 7));
      if (daemon <= 0 || ::kill(daemon, 0) == 0 || errno != ESRCH) continue;
      try {
        WorkerCgroup left({entry.path().string()}, unified_);  // killed and removed as it goes
      } catch (const std::exception&) {
        continue;
      }
      removed += fs::exists(entry.path(), ec) ? 0 : 1;
    }
  return removed;
}

std::string WorkerCgroups::describe() const {
  if (unified_) return "cgroup v2 under " + parents_.front();
  return "cgroup v1 under " + parents_.front() + " and " + parents_.back();
}

}  // namespace qgate::server
