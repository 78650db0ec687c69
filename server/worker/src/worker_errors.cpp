// Worker error kinds: the load-error mapping, their names and the error record.
#include "qgate/worker/worker_errors.h"

namespace qgate::worker {

v1::WorkerErrorKind to_error_kind(BuildLoadError error) {
  switch (error) {
    case BuildLoadError::none: return v1::WORKER_ERROR_KIND_UNSPECIFIED;
    case BuildLoadError::not_found: return v1::WORKER_ERROR_KIND_NOT_FOUND;
    case BuildLoadError::not_elf: return v1::WORKER_ERROR_KIND_NOT_ELF;
    case BuildLoadError::dlopen_failed: return v1::WORKER_ERROR_KIND_DLOPEN_FAILED;
    case BuildLoadError::missing_symbol: return v1::WORKER_ERROR_KIND_MISSING_SYMBOL;
    case BuildLoadError::abi_mismatch: return v1::WORKER_ERROR_KIND_ABI_MISMATCH;
  }
  return v1::WORKER_ERROR_KIND_UNSPECIFIED;
}

const char* to_string(v1::WorkerErrorKind kind) {
  switch (kind) {
    case v1::WORKER_ERROR_KIND_NOT_FOUND: return "not_found";
    case v1::WORKER_ERROR_KIND_NOT_ELF: return "not_elf";
    case v1::WORKER_ERROR_KIND_DLOPEN_FAILED: return "dlopen_failed";
    case v1::WORKER_ERROR_KIND_MISSING_SYMBOL: return "missing_symbol";
    case v1::WORKER_ERROR_KIND_ABI_MISMATCH: return "abi_mismatch";
    case v1::WORKER_ERROR_KIND_INVALID_ARGUMENT: return "invalid_argument";
    case v1::WORKER_ERROR_KIND_INVALID_REQUEST: return "invalid_request";
    case v1::WORKER_ERROR_KIND_DEVICE: return "device";
    case v1::WORKER_ERROR_KIND_UNKNOWN_NUMERICS: return "unknown_numerics";
    case v1::WORKER_ERROR_KIND_MODEL_FILE: return "model_file";
    default: return "unspecified";
  }
}

v1::WorkerRecord error_record(v1::WorkerErrorKind kind, const std::string& message) {
  v1::WorkerRecord record;
  record.mutable_error()->set_kind(kind);
  record.mutable_error()->set_message(message);
  return record;
}

}  // namespace qgate::worker
