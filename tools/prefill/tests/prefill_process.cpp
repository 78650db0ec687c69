// Runs qgate-prefill as a subprocess (tests/support/process_run).
#include "prefill_process.h"

namespace qgate::prefill::testing {

std::string prefill_binary() { return test_support::path_from_env("QGATE_PREFILL_BINARY", QGATE_PREFILL_BINARY); }

std::string ref_library() { return test_support::path_from_env("QGATE_REF_LIBRARY", QGATE_REF_LIBRARY); }

std::string make_temp_dir() { return test_support::make_temp_dir("qgate-prefill-test"); }

ProcessResult run_prefill(const std::string& args, const std::string& env) {
  return test_support::run_process(prefill_binary(), args, "", env);
}

}  // namespace qgate::prefill::testing
