// Runs qgate-prefill as a subprocess through the shell, with stdout and stderr in temp files.
#include "prefill_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace qgate::prefill::testing {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string prefill_binary() {
  const char* env = std::getenv("QGATE_PREFILL_BINARY");
  return env && *env ? env : QGATE_PREFILL_BINARY;
}

std::string ref_library() {
  const char* env = std::getenv("QGATE_REF_LIBRARY");
  return env && *env ? env : QGATE_REF_LIBRARY;
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/qgate-prefill-test-XXXXXX";
  if (!mkdtemp(tpl.data())) throw std::runtime_error("mkdtemp failed");
  return tpl;
}

ProcessResult run_prefill(const std::string& args, const std::string& env) {
  char out_tpl[] = "/tmp/qgate-prefill-out-XXXXXX";
  char err_tpl[] = "/tmp/qgate-prefill-err-XXXXXX";
  close(mkstemp(out_tpl));
  close(mkstemp(err_tpl));
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + prefill_binary() + " " + args + " >" + out_tpl +
                          " 2>" + err_tpl + " </dev/null";
  const int status = std::system(cmd.c_str());
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_tpl);
  r.err = slurp(err_tpl);
  unlink(out_tpl);
  unlink(err_tpl);
  return r;
}

}  // namespace qgate::prefill::testing
