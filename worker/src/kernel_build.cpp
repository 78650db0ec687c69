// Loads kernel builds and wraps their C ABI; every failure becomes a clear message, never a crash.
#include "qgate/worker/kernel_build.h"

#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "qgate/common/sha256.h"
#include "qgate/common/signal_names.h"

namespace qgate::worker {

const char* to_string(BuildLoadError error) {
  switch (error) {
    case BuildLoadError::none: return "none";
    case BuildLoadError::not_found: return "not_found";
    case BuildLoadError::not_elf: return "not_elf";
    case BuildLoadError::dlopen_failed: return "dlopen_failed";
    case BuildLoadError::missing_symbol: return "missing_symbol";
    case BuildLoadError::abi_mismatch: return "abi_mismatch";
    case BuildLoadError::bad_declaration: return "bad_declaration";
  }
  return "unknown";
}

const char* to_string(qgate_status status) {
  switch (status) {
    case QGATE_OK: return "OK";
    case QGATE_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case QGATE_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case QGATE_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case QGATE_ERR_BACKEND: return "BACKEND";
    case QGATE_ERR_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN_STATUS";
}

namespace {

// Which build entry point the process is in; read by the signal handlers below, so plain
// lock-free atomics of string literals.
std::atomic<const char*> g_current_call{nullptr};
std::atomic<const char*> g_last_call{nullptr};

/// Marks the span of one call into the build.
class BuildCall {
 public:
  explicit BuildCall(const char* name) {
    g_last_call.store(name);
    g_current_call.store(name);
  }
  ~BuildCall() { g_current_call.store(nullptr); }
  BuildCall(const BuildCall&) = delete;
  BuildCall& operator=(const BuildCall&) = delete;
};

const char* signal_name(int sig) {
  const char* known = common::known_signal_name(sig);
  return known ? known : "signal";
}

// Async-signal-safe: write(2) of pieces, no allocation.
void write_stderr(const char* const* pieces) {
  for (; *pieces; ++pieces) {
    const char* p = *pieces;
    size_t n = std::strlen(p);
    while (n > 0) {
      const ssize_t w = ::write(STDERR_FILENO, p, n);
      if (w <= 0) return;
      p += w;
      n -= size_t(w);
    }
  }
}

void where_line(const char* head) {
  const char* current = g_current_call.load();
  const char* last = g_last_call.load();
  if (current) {
    const char* parts[] = {head, " in ", current, "\n", nullptr};
    write_stderr(parts);
  } else if (last) {
    const char* parts[] = {head, " outside the build (last call: ", last, ")\n", nullptr};
    write_stderr(parts);
  } else {
    const char* parts[] = {head, " before any build call\n", nullptr};
    write_stderr(parts);
  }
}

void on_fatal_signal(int sig) {
  // SA_RESETHAND restored the default action: re-raising ends the process with this signal.
  const char* head[] = {"qgate-worker: fatal signal ", signal_name(sig), nullptr};
  write_stderr(head);
  where_line("");
  raise(sig);
}

void on_status_signal(int) {
  const int saved = errno;
  where_line("qgate-worker: status:");
  errno = saved;
}

// dlopen of a file that is not an ELF object gives an unhelpful message; say it plainly first.
BuildLoadError check_elf(const std::string& path, std::string* message) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *message = "cannot open kernel build '" + path + "': " + std::strerror(errno);
    return BuildLoadError::not_found;
  }
  Elf64_Ehdr header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (in.gcount() < 4 || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    *message = "'" + path + "' is not a shared object (no ELF header)";
    return BuildLoadError::not_elf;
  }
  if (in.gcount() != sizeof header || header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_type != ET_DYN ||
      header.e_machine != EM_X86_64) {
    *message = "'" + path + "' is not an x86-64 ELF shared object";
    return BuildLoadError::not_elf;
  }
  // dlopen maps segments without checking them against the file size; touching a page past the
  // end of a truncated file raises SIGBUS in the loader. Check every loaded range first.
  in.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(in.tellg());
  auto truncated = [&](const char* what) {
    *message = "'" + path + "' is a truncated or corrupt shared object (" + what + " past the end of the file)";
    return BuildLoadError::not_elf;
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      header.e_phoff + uint64_t(header.e_phnum) * sizeof(Elf64_Phdr) > size)
    return truncated("program headers");
  if (header.e_shoff + uint64_t(header.e_shnum) * header.e_shentsize > size) return truncated("section headers");
  in.seekg(std::streamoff(header.e_phoff));
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.read(reinterpret_cast<char*>(&ph), sizeof ph);
    if (!in) return truncated("a program header");
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > size) return truncated("a loadable segment");
  }
  return BuildLoadError::none;
}

/// Length of a well-formed UTF-8 sequence starting at `s` (at most `left` bytes), or 0.
size_t utf8_sequence(const unsigned char* s, size_t left) {
  const unsigned char c = s[0];
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (n > left) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong, surrogate
  return n;
}

/// `text` as a declared string, or nullopt with *why set: at most kMaxDeclaredBytes, UTF-8, no
/// control characters. Reads at most one byte past the limit, however long the build's string is.
std::optional<std::string> declared_string(const char* text, const char* field, std::string* why) {
  if (!text) return std::string();
  const size_t limit = KernelBuild::kMaxDeclaredBytes;
  const size_t length = strnlen(text, limit + 1);
  if (length > limit) {
    *why = std::string(field) + " is longer than " + std::to_string(limit) + " bytes";
    return std::nullopt;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(text);
  for (size_t at = 0; at < length;) {
    const size_t n = utf8_sequence(bytes + at, length - at);
    if (n == 0) {
      *why = std::string(field) + " is not UTF-8 (byte " + std::to_string(at) + ")";
      return std::nullopt;
    }
    if (n == 1 && (bytes[at] < 0x20 || bytes[at] == 0x7F)) {
      *why = std::string(field) + " holds a control character (byte " + std::to_string(at) + ")";
      return std::nullopt;
    }
    at += n;
  }
  return std::string(text, length);
}

/// Reads and checks, once, what the build declares about itself; false with *why set when any string is
/// not one qgate can store and show.
bool read_declaration(const KernelAbi& abi, v1::BuildInfo* out, DeclaredNumerics* numerics_out, std::string* why) {
  const qgate_build_info* info = nullptr;
  {
    BuildCall call("qgate_get_build_info");
    info = abi.build_info();
  }
  auto take = [&](const char* text, const char* field, std::string* into) {
    auto checked = declared_string(text, field, why);
    if (checked) *into = std::move(*checked);
    return checked.has_value();
  };
  if (info) {
    std::string name, version, commit, backends, archs;
    if (!take(info->name, "qgate_get_build_info's name", &name) ||
        !take(info->version, "qgate_get_build_info's version", &version) ||
        !take(info->commit, "qgate_get_build_info's commit", &commit) ||
        !take(info->backends, "qgate_get_build_info's backends", &backends) ||
        !take(info->cuda_archs, "qgate_get_build_info's cuda_archs", &archs))
      return false;
    out->set_name(name);
    out->set_version(version);
    out->set_commit(commit);
    out->set_backends(backends);
    out->set_cuda_archs(archs);
  }
  auto numerics = [&](auto fn, const char* symbol, std::string* into, auto... backend) {
    if (!fn) return true;
    const char* declared = nullptr;
    {
      BuildCall call(symbol);
      declared = fn(backend...);
    }
    return take(declared, symbol, into);
  };
  return numerics(abi.build_numerics, QGATE_BUILD_NUMERICS_SYMBOL, &numerics_out->any) &&
         numerics(abi.build_numerics_on, QGATE_BUILD_NUMERICS_ON_SYMBOL, &numerics_out->cpu,
                  int32_t(QGATE_BACKEND_CPU)) &&
         numerics(abi.build_numerics_on, QGATE_BUILD_NUMERICS_ON_SYMBOL, &numerics_out->cuda,
                  int32_t(QGATE_BACKEND_CUDA));
}
}  // namespace

std::unique_ptr<KernelBuild> KernelBuild::load(const std::string& path, BuildLoadError* error,
                                               std::string* message) {
  *error = check_elf(path, message);
  if (*error != BuildLoadError::none) return nullptr;

  // RTLD_LOCAL keeps two builds (candidate and baseline) from resolving each other's symbols.
  void* handle = nullptr;
  {
    BuildCall call("dlopen");  // the build's static constructors run here
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    *error = BuildLoadError::dlopen_failed;
    const char* why = dlerror();
    *message = "cannot load kernel build '" + path + "': " + (why ? why : "unknown dlopen error");
    return nullptr;
  }
  std::unique_ptr<KernelBuild> build(new KernelBuild());
  build->handle_ = handle;
  build->path_ = path;

  KernelAbi& abi = build->abi_;
  const std::string missing = abi::bind_entry_points(handle, &abi);
  // The version comes first: a build of another ABI may not have the other symbols at all.
  if (!abi.abi_version) {
    *error = BuildLoadError::missing_symbol;
    *message = "'" + path + "' is not a qgate kernel build: it does not export qgate_abi_version";
    return nullptr;
  }
  uint32_t version = 0;
  {
    BuildCall call("qgate_abi_version");
    version = abi.abi_version();
  }
  if (version != QGATE_ABI_VERSION) {
    *error = BuildLoadError::abi_mismatch;
    *message = "kernel build '" + path + "' has ABI version " + std::to_string(version) +
               ", this worker speaks version " + std::to_string(QGATE_ABI_VERSION);
    return nullptr;
  }
  if (!missing.empty()) {
    *error = BuildLoadError::missing_symbol;
    *message = "kernel build '" + path + "' does not export: " + missing;
    return nullptr;
  }
  std::string why;
  if (!read_declaration(abi, &build->declared_, &build->numerics_, &why)) {
    *error = BuildLoadError::bad_declaration;
    *message = "kernel build '" + path + "' declares what qgate cannot store: " + why;
    return nullptr;
  }
  build->declared_.set_abi_version(version);
  *error = BuildLoadError::none;
  return build;
}

KernelBuild::~KernelBuild() {
  // Builds are not dlclose'd: a CUDA module unloaded while its context lives is a common crash.
}

v1::BuildInfo KernelBuild::info() const {
  v1::BuildInfo out = declared_;
  out.set_path(path_);
  out.set_sha256(common::sha256_file_hex(path_));
  out.set_numerics(declared_numerics());
  return out;
}

std::string KernelBuild::declared_numerics() const { return numerics_.any; }

std::string KernelBuild::declared_numerics(qgate_backend backend) const {
  const std::string& on = backend == QGATE_BACKEND_CUDA ? numerics_.cuda : numerics_.cpu;
  return on.empty() ? numerics_.any : on;
}

BuildContext::BuildContext(const KernelBuild& build, qgate_backend backend, int device, int path,
                           int threads)
    : build_(build) {
  qgate_context_options options{};
  options.struct_size = sizeof options;
  options.backend = backend;
  options.device = device;
  options.path = path;
  options.cpu_threads = threads;
  char error[1024] = {};
  qgate_status status = QGATE_OK;
  {
    BuildCall call("qgate_context_create");
    status = build.abi().context_create(&options, &ctx_, error, sizeof error);
  }
  if (status != QGATE_OK || !ctx_) {
    throw std::runtime_error(std::string("cannot create a context (") + to_string(status) +
                             "): " + (error[0] ? error : "no message"));
  }
}

BuildContext::~BuildContext() {
  if (!ctx_) return;
  BuildCall call("qgate_context_destroy");
  build_.abi().context_destroy(ctx_);
}

std::string BuildContext::last_error() const {
  BuildCall call("qgate_context_last_error");
  const char* msg = build_.abi().context_last_error(ctx_);
  return msg ? msg : "";
}

PreparedGemm::PreparedGemm(BuildContext& ctx, int32_t type, int64_t od, int64_t k,
                           const void* weights, int64_t max_nt)
    : ctx_(ctx) {
  {
    BuildCall call("qgate_gemm_prepare");
    status_ = ctx.abi().gemm_prepare(ctx.get(), type, od, k, weights, max_nt, &gemm_);
  }
  if (status_ != QGATE_OK) {
    message_ = ctx.last_error();
    gemm_ = nullptr;
  } else if (!gemm_) {
    status_ = QGATE_ERR_INTERNAL;
    message_ = "qgate_gemm_prepare returned OK but no GEMM";
  }
}

PreparedGemm::~PreparedGemm() {
  if (!gemm_) return;
  BuildCall call("qgate_gemm_release");
  ctx_.abi().gemm_release(gemm_);
}

qgate_status PreparedGemm::run(const float* x, int64_t nt, float* y, void* stream) {
  {
    BuildCall call("qgate_gemm_run");
    status_ = ctx_.abi().gemm_run(gemm_, x, nt, y, stream);
  }
  if (status_ != QGATE_OK) message_ = ctx_.last_error();
  return status_;
}

int64_t PreparedGemm::resident_bytes() const {
  if (!gemm_) return 0;
  BuildCall call("qgate_gemm_resident_bytes");
  return ctx_.abi().gemm_resident_bytes(gemm_);
}

int BuildContext::path() const {
  BuildCall call("qgate_context_path");
  return build_.abi().context_path(ctx_);
}

const char* current_build_call() { return g_current_call.load(); }
const char* last_build_call() { return g_last_call.load(); }

void install_fatal_signal_report() {
  // Its own stack, so a build that overflowed the main one still gets its line written.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction fatal {};
  fatal.sa_handler = on_fatal_signal;
  fatal.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&fatal.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &fatal, nullptr);
  struct sigaction status {};
  status.sa_handler = on_status_signal;
  status.sa_flags = SA_RESTART;
  sigemptyset(&status.sa_mask);
  sigaction(SIGUSR1, &status, nullptr);
}

}  // namespace qgate::worker
