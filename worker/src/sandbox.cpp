// The worker's Landlock sandbox (see sandbox.h). The ruleset handles every access right the
// running kernel's Landlock knows, up to ABI 6, and grants back only what a worker needs.
#include "qgate/worker/sandbox.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace qgate::worker {
namespace {

// The Landlock ABI as the kernel defines it (linux/landlock.h; Debian 12's header stops at ABI 2).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr uint64_t kFsExecute = 1ull << 0, kFsWriteFile = 1ull << 1, kFsReadFile = 1ull << 2,
                   kFsReadDir = 1ull << 3;
constexpr uint64_t kFsAllAbi1 = (1ull << 13) - 1;  // execute .. make_sym
constexpr uint64_t kFsRefer = 1ull << 13;          // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;       // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;       // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0, kNetConnectTcp = 1ull << 1;  // ABI 4
constexpr uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;  // ABI 6

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

long landlock_abi() {
  return syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
}

std::string installation_root() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().parent_path().string();
}

}  // namespace

bool parse_sandbox_mode(const std::string& text, SandboxMode* out) {
  if (text == "auto") *out = SandboxMode::automatic;
  else if (text == "on") *out = SandboxMode::on;
  else if (text == "off") *out = SandboxMode::off;
  else return false;
  return true;
}

SandboxPlan sandbox_plan(const std::string& build_path, const std::vector<std::string>& extra_reads) {
  SandboxPlan plan;
  // System trees (libraries, the loader's cache, the CUDA toolkit and driver, /proc and /sys for the
  // driver and NVML), the installation the worker runs from (a bundle's plugins/ and lib/, or a
  // build tree), the build, and the folders of LD_LIBRARY_PATH.
  plan.read_paths = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/run"};
  if (const std::string root = installation_root(); !root.empty()) plan.read_paths.push_back(root);
  if (!build_path.empty()) plan.read_paths.push_back(std::filesystem::absolute(build_path).string());
  for (const auto& p : extra_reads)
    if (!p.empty()) plan.read_paths.push_back(std::filesystem::absolute(p).string());
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
    std::string dirs = ld;
    for (size_t at = 0; at <= dirs.size();) {
      const size_t colon = std::min(dirs.find(':', at), dirs.size());
      if (colon > at) plan.read_paths.push_back(dirs.substr(at, colon - at));
      at = colon + 1;
    }
  }
  return plan;
}

std::string apply_sandbox(SandboxMode mode, const SandboxPlan& plan) {
  if (mode == SandboxMode::off) return "off (--sandbox off)";
  const long abi = landlock_abi();
  if (abi < 1) {
    const std::string why = std::string("off: this kernel has no Landlock (") + std::strerror(errno) + ")";
    if (mode == SandboxMode::on) throw std::runtime_error("--sandbox on: " + why);
    return why;
  }
  uint64_t fs = kFsAllAbi1;
  if (abi >= 2) fs |= kFsRefer;
  if (abi >= 3) fs |= kFsTruncate;
  if (abi >= 5) fs |= kFsIoctlDev;
  RulesetAttr attr{fs, abi >= 4 ? (kNetBindTcp | kNetConnectTcp) : 0, abi >= 6 ? (kScopeAbstractUnix | kScopeSignal) : 0};
  const size_t attr_size = abi >= 6 ? sizeof(RulesetAttr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  const int ruleset = int(syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (ruleset < 0) throw std::runtime_error(std::string("landlock: cannot create a ruleset: ") + std::strerror(errno));
  const uint64_t read_dir = kFsExecute | kFsReadFile | kFsReadDir;
  const uint64_t read_file = kFsExecute | kFsReadFile;
  const uint64_t file_rights = kFsExecute | kFsWriteFile | kFsReadFile | (abi >= 3 ? kFsTruncate : 0);
  auto allow = [&](const std::string& path, uint64_t dir_rights, bool required) {
    const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (required) throw std::runtime_error("landlock: cannot open " + path + ": " + std::strerror(errno));
      return;
    }
    struct stat st {};
    fstat(fd, &st);
    PathBeneathAttr rule{S_ISDIR(st.st_mode) ? dir_rights : (dir_rights & file_rights), fd};
    const long rc = syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0);
    const int saved = errno;
    close(fd);
    if (rc != 0 && required)
      throw std::runtime_error("landlock: cannot allow " + path + ": " + std::strerror(saved));
  };
  try {
    for (const auto& path : plan.read_paths) allow(path, read_dir, false);
    // Device nodes (the GPU's, /dev/null, /dev/shm) and the scratch folder: read and write.
    allow("/dev", fs, false);
    if (!plan.scratch_dir.empty()) allow(plan.scratch_dir, fs, true);
    for (const auto& path : plan.write_paths) allow(path, fs, true);
  } catch (...) {
    close(ruleset);
    throw;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    const std::string why = std::strerror(errno);
    close(ruleset);
    throw std::runtime_error("landlock: cannot restrict the worker: " + why);
  }
  close(ruleset);
  std::string what = "landlock abi " + std::to_string(abi) + ": files";
  if (abi >= 4) what += ", tcp";
  if (abi >= 6) what += ", signals";
  return what;
}

ScratchDir::ScratchDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/qgate-worker-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot make a scratch folder under " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
  // The worker cannot remove the folder itself once sandboxed (its parent is outside the sandbox):
  // a janitor started now, outside it, removes the folder when the worker is gone (the pipe's end).
  int gone[2];
  if (pipe2(gone, O_CLOEXEC) != 0) return;
  const pid_t janitor = fork();
  if (janitor == 0) {
    // Its own session: qgated ends a worker by killing the worker's process group, and the folder
    // must still go. It holds nothing of the worker's: no record stream, no pipe to the judge or to qgated.
    // Its own name too, so that neither an operator nor qgated's reaper takes it for a worker once it
    // outlives one.
    setsid();
    prctl(PR_SET_NAME, "qgate-janitor", 0, 0, 0);
    const int keep = gone[0];
    const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd <= 2; ++fd) dup2(devnull, fd);
    for (int fd = 3; fd < keep; ++fd) close(fd);
    syscall(SYS_close_range, unsigned(keep) + 1, ~0u, 0u);
    char byte;
    for (;;) {
      const ssize_t n = read(keep, &byte, 1);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    _exit(0);
  }
  close(gone[0]);
  if (janitor < 0) close(gone[1]);
  else janitor_pipe_ = gone[1];
}

ScratchDir::~ScratchDir() {
  // What the sandbox lets the worker remove goes now; the janitor takes the folder when this process ends.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) std::filesystem::remove_all(entry, ec);
}

}  // namespace qgate::worker
