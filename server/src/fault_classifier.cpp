// FaultClassifier: dispositions from the worker protocol's typed fields and a worker's exit.
#include "qgate/server/fault_classifier.h"

#include "qgate/server/job_control.h"
#include "qgate/v1/record_words.h"

namespace qgate::server {

Fault FaultClassifier::died(const WorkerExit& exit, std::string_view phase) {
  if (exit.memory_limit)
    return {v1::DISPOSITION_CRASHED, "killed at the worker's memory limit (qgated --worker-memory-max) during " +
                                         std::string(phase)};
  if (exit.signal == 0)
    return {v1::DISPOSITION_CRASHED, "the worker exited (" + exit.text + ") during " + std::string(phase)};
  const std::string call = short_call_name(exit.fatal_call);
  return {v1::DISPOSITION_CRASHED,
          signal_name(exit.signal) + (call.empty() ? " during " + std::string(phase) : " in " + call)};
}

Fault FaultClassifier::worker_error(const v1::WorkerError& error) {
  const char* refused = nullptr;
  switch (error.kind()) {
    case v1::WORKER_ERROR_KIND_NOT_ELF: refused = "not an ELF shared object"; break;
    case v1::WORKER_ERROR_KIND_DLOPEN_FAILED: refused = "cannot be loaded"; break;
    case v1::WORKER_ERROR_KIND_MISSING_SYMBOL: refused = "missing ABI symbols"; break;
    case v1::WORKER_ERROR_KIND_ABI_MISMATCH: refused = "wrong ABI version"; break;
    case v1::WORKER_ERROR_KIND_BAD_DECLARATION: refused = "a declaration qgate cannot store"; break;
    default: break;
  }
  if (refused) return {v1::DISPOSITION_REJECTED, std::string(refused) + ": " + error.message()};
  // Only code in the worker's process can write to the judge's channel: the build.
  if (error.kind() == v1::WORKER_ERROR_KIND_CHANNEL_TAMPERED)
    return {v1::DISPOSITION_INCORRECT, "the build wrote to its judge's channel: " + error.message()};
  return {v1::DISPOSITION_ERROR, std::string(words::word(error.kind())) + ": " + error.message()};
}

Fault FaultClassifier::failed(std::string_view what, const std::string& message, const v1::CudaFailure& cuda,
                              std::string_view phase) {
  if (!cuda.context_lost()) return {v1::DISPOSITION_INCORRECT, std::string(what) + ": " + message};
  const std::string call = short_call_name(cuda.last_build_call());
  return {v1::DISPOSITION_CRASHED, (cuda.error().empty() ? std::string("a CUDA error") : cuda.error()) + " in " +
                                       (call.empty() ? std::string(phase) : call) + " (the CUDA context is lost)"};
}

Fault FaultClassifier::timed_out(std::string_view what, int64_t limit_s, const std::string& call) {
  return {v1::DISPOSITION_TIMEOUT,
          std::string(what) + " exceeded " + std::to_string(limit_s) + " s" + (call.empty() ? "" : " in " + call)};
}

}  // namespace qgate::server
