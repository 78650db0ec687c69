// Worker error kinds: the load-error mapping and the error record (the kinds' words are in
// qgate/v1/record_words.h).
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
    case BuildLoadError::bad_declaration: return v1::WORKER_ERROR_KIND_BAD_DECLARATION;
  }
  return v1::WORKER_ERROR_KIND_UNSPECIFIED;
}

v1::WorkerRecord error_record(v1::WorkerErrorKind kind, const std::string& message) {
  v1::WorkerRecord record;
  record.mutable_error()->set_kind(kind);
  record.mutable_error()->set_message(message);
  return record;
}

}  // namespace qgate::worker
