// Runs a binary through the shell with its streams in temporary files (see process_run.h).
#include "process_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace qgate::test_support {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir_root() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

// A new empty file under the temp root; its path.
std::string make_temp_file(const std::string& prefix) {
  std::string tpl = temp_dir_root() + "/" + prefix + "-XXXXXX";
  const int fd = mkstemp(tpl.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed for " + tpl);
  close(fd);
  return tpl;
}

}  // namespace

ProcessResult run_process(const std::string& binary, const std::string& args, const std::string& input,
                          const std::string& env) {
  const std::string out_path = make_temp_file("qgate-test-out");
  const std::string err_path = make_temp_file("qgate-test-err");
  const std::string in_path = make_temp_file("qgate-test-in");
  std::ofstream(in_path, std::ios::binary) << input;
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + binary + " " + args + " >" + out_path +
                          " 2>" + err_path + " <" + in_path;
  const int status = std::system(cmd.c_str());
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  unlink(in_path.c_str());
  return r;
}

std::string path_from_env(const char* name, const std::string& build_tree_path) {
  const char* env = std::getenv(name);
  return env && *env ? env : build_tree_path;
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tpl = temp_dir_root() + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(tpl.data())) throw std::runtime_error("mkdtemp failed for " + tpl);
  return tpl;
}

}  // namespace qgate::test_support
