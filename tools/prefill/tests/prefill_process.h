// Test helper: runs the real qgate-prefill binary and captures what it wrote.
#pragma once

#include <string>

#include "process_run.h"

namespace qgate::prefill::testing {

using ProcessResult = ::qgate::test_support::ProcessResult;

/// The binary and the reference build: QGATE_PREFILL_BINARY / QGATE_REF_LIBRARY from the
/// environment when set (a bundle), else the build tree's.
std::string prefill_binary();
std::string ref_library();

/// Runs `qgate-prefill <args>` with `env` prepended (e.g. "MINFER_MMQ=1"), capturing both streams.
ProcessResult run_prefill(const std::string& args, const std::string& env = "");

/// A fresh directory under $TMPDIR (or /tmp), removed by the caller.
std::string make_temp_dir();

}  // namespace qgate::prefill::testing
