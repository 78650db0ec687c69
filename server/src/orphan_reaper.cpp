// OrphanReaper: the children qgated did not start are what its workers left behind; kill them.
#include "qgate/server/orphan_reaper.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

namespace qgate::server {
namespace {

// Every process whose parent is this one, read from /proc/<pid>/stat (field 4, after the command's
// closing parenthesis, which the command itself may contain).
std::vector<pid_t> children_of_this_process() {
  const pid_t self = getpid();
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long parent = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &parent) != 2) continue;
    if (parent == self) children.push_back(pid_t(std::stol(name)));
  }
  return children;
}

}  // namespace

OrphanReaper& OrphanReaper::instance() {
  static OrphanReaper reaper;
  return reaper;
}

bool OrphanReaper::adopt(std::string* why) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    if (why) *why = std::string("PR_SET_CHILD_SUBREAPER: ") + std::strerror(errno);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  adopting_ = true;
  return true;
}

bool OrphanReaper::adopting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return adopting_;
}

pid_t OrphanReaper::fork_recorded() {
  // Held across fork, so a concurrent reap_orphans never sees the new child unrecorded.
  std::lock_guard<std::mutex> lock(mutex_);
  const pid_t pid = fork();
  if (pid > 0) ours_.insert(pid);
  return pid;
}

void OrphanReaper::forget(pid_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  ours_.erase(pid);
}

int OrphanReaper::reap_orphans() {
  int ended = 0;
  std::set<pid_t> stuck;  // killed, yet not gone within the wait: not waited for again
  // Bounded: each round kills what is there now; what those leave behind shows up in the next.
  for (int round = 0; round < 64; ++round) {
    std::vector<pid_t> orphans;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!adopting_) return ended;
      for (pid_t child : children_of_this_process())
        if (!ours_.count(child) && !stuck.count(child)) orphans.push_back(child);
      for (pid_t orphan : orphans) ::kill(orphan, SIGKILL);
    }
    if (orphans.empty()) break;
    for (pid_t orphan : orphans) {
      // SIGKILL ends it unless it is inside an uninterruptible call (a driver): wait a while for that.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (true) {
        const pid_t r = waitpid(orphan, nullptr, WNOHANG);
        if (r == orphan || (r < 0 && errno == ECHILD)) break;
        if (std::chrono::steady_clock::now() >= deadline) {
          spdlog::warn("qgated: process {} that a worker left behind did not end within 5 s of SIGKILL", orphan);
          stuck.insert(orphan);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (stuck.count(orphan)) continue;
      spdlog::info("qgated: ended process {}, which a worker left behind", orphan);
      ++ended;
    }
  }
  return ended;
}

}  // namespace qgate::server
