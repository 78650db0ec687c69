// Test helper: runs a real qgate binary as a subprocess and captures what it wrote.
#pragma once

#include <string>

namespace qgate::test_support {

struct ProcessResult {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended it
  std::string out;
  std::string err;
};

/// Runs `binary args` through the shell with `env` prepended (e.g. "MINFER_MMQ=1") and `input` on
/// its stdin, capturing stdout and stderr in temporary files that are removed afterwards.
ProcessResult run_process(const std::string& binary, const std::string& args, const std::string& input = "",
                          const std::string& env = "");

/// The environment variable `name` when it is set and not empty (a bundle on a GPU host), else
/// `build_tree_path`.
std::string path_from_env(const char* name, const std::string& build_tree_path);

/// A fresh directory under $TMPDIR (or /tmp) named `prefix`-XXXXXX; the caller removes it.
std::string make_temp_dir(const std::string& prefix);

}  // namespace qgate::test_support
