// Loading a kernel build (.so) with dlopen: checks that it is an ELF shared object, resolves the
// ABI, refuses a version mismatch, and wraps contexts and prepared GEMMs in RAII handles.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_table.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

/// Why a build could not be loaded; each kind is a distinct, stable string for reports.
/// bad_declaration: a string the build declares (qgate_get_build_info's fields, its numerics) is
/// over kMaxDeclaredBytes, is not UTF-8, or holds control characters.
enum class BuildLoadError { none, not_found, not_elf, dlopen_failed, missing_symbol, abi_mismatch, bad_declaration };
const char* to_string(BuildLoadError error);

/// The numerics a build declares, as read at load: "" where it declares none.
struct DeclaredNumerics {
  std::string any;   // qgate_build_numerics()
  std::string cpu;   // qgate_build_numerics_on(QGATE_BACKEND_CPU)
  std::string cuda;  // qgate_build_numerics_on(QGATE_BACKEND_CUDA)
};

/// The ABI entry points of one loaded build.
using KernelAbi = abi::EntryPoints;

class KernelBuild {
 public:
  /// Returns nullptr with *error and *message set when the file cannot serve as a build.
  static std::unique_ptr<KernelBuild> load(const std::string& path, BuildLoadError* error,
                                           std::string* message);
  ~KernelBuild();
  KernelBuild(const KernelBuild&) = delete;
  KernelBuild& operator=(const KernelBuild&) = delete;

  const KernelAbi& abi() const { return abi_; }
  const std::string& path() const { return path_; }
  /// The build's declaration, read and checked once at load.
  v1::BuildInfo info() const;
  /// The most bytes a declared string may have.
  static constexpr size_t kMaxDeclaredBytes = 256;
  /// What the build declares through qgate_build_numerics(), or "" when it does not export it.
  std::string declared_numerics() const;
  /// What it declares for `backend`: qgate_build_numerics_on(backend) when exported and not
  /// empty, else declared_numerics().
  std::string declared_numerics(qgate_backend backend) const;

 private:
  KernelBuild() = default;
  void* handle_ = nullptr;
  std::string path_;
  KernelAbi abi_;
  v1::BuildInfo declared_;     // what qgate_get_build_info said, checked (path and sha256 are added by info())
  DeclaredNumerics numerics_;  // read once, so the build cannot answer differently later
};

/// A qgate_context of one build, destroyed with the handle.
class BuildContext {
 public:
  /// Throws std::runtime_error with the build's message when the context cannot be created.
  BuildContext(const KernelBuild& build, qgate_backend backend, int device, int path, int threads);
  ~BuildContext();
  BuildContext(const BuildContext&) = delete;
  BuildContext& operator=(const BuildContext&) = delete;

  qgate_context* get() const { return ctx_; }
  const KernelAbi& abi() const { return build_.abi(); }
  int path() const;
  std::string last_error() const;

 private:
  const KernelBuild& build_;
  qgate_context* ctx_ = nullptr;
};

/// A prepared GEMM; `status` says why preparation failed when `ok()` is false.
class PreparedGemm {
 public:
  PreparedGemm(BuildContext& ctx, int32_t type, int64_t od, int64_t k, const void* weights,
               int64_t max_nt);
  ~PreparedGemm();
  PreparedGemm(const PreparedGemm&) = delete;
  PreparedGemm& operator=(const PreparedGemm&) = delete;

  bool ok() const { return gemm_ != nullptr; }
  qgate_status status() const { return status_; }
  const std::string& message() const { return message_; }
  /// Enqueues one GEMM; returns the build's status and keeps its message.
  qgate_status run(const float* x, int64_t nt, float* y, void* stream);
  int64_t resident_bytes() const;

 private:
  BuildContext& ctx_;
  qgate_gemm* gemm_ = nullptr;
  qgate_status status_ = QGATE_OK;
  std::string message_;
};

const char* to_string(qgate_status status);

/// The kernel-build entry point this process is inside now ("qgate_gemm_run"), or nullptr between
/// calls; and the one it entered last. Every call through the wrappers above updates both.
const char* current_build_call();
const char* last_build_call();

/// Makes a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) write one line to stderr
/// before the process dies of it, naming the build call it hit:
///   "qgate-worker: fatal signal SIGSEGV in qgate_gemm_prepare"
/// and makes SIGUSR1 write where the process is without stopping it:
///   "qgate-worker: status: in qgate_gemm_run"
/// qgated reads these lines from the worker's stderr to say where a build crashed or hung.
void install_fatal_signal_report();

}  // namespace qgate::worker
