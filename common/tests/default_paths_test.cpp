// Default data dir and address: the environment's order of precedence, and address normalization.
#include "qgate/common/default_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace qgate::paths {
namespace {

// Sets (or unsets, with nullopt) one environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DefaultPaths, DataDirPrefersQgateDataDirThenXdgThenHome) {
  ScopedEnv home("HOME", "/home/u");
  {
    ScopedEnv data("QGATE_DATA_DIR", "/srv/qgate");
    ScopedEnv xdg("XDG_DATA_HOME", "/xdg");
    EXPECT_EQ(default_data_dir(), "/srv/qgate");
  }
  {
    ScopedEnv data("QGATE_DATA_DIR", "");
    ScopedEnv xdg("XDG_DATA_HOME", "/xdg");
    EXPECT_EQ(default_data_dir(), "/xdg/qgate");
  }
  ScopedEnv data("QGATE_DATA_DIR", std::nullopt);
  ScopedEnv xdg("XDG_DATA_HOME", std::nullopt);
  EXPECT_EQ(default_data_dir(), "/home/u/.local/share/qgate");
  EXPECT_EQ(default_socket_path(), "/home/u/.local/share/qgate/qgated.sock");
  EXPECT_EQ(default_server_address(), "unix:///home/u/.local/share/qgate/qgated.sock");
}

TEST(DefaultPaths, GrpcTargetFromWhatAUserTypes) {
  EXPECT_EQ(to_grpc_target("/run/q.sock"), "unix:///run/q.sock");
  EXPECT_EQ(to_grpc_target("unix:///run/q.sock"), "unix:///run/q.sock");
  EXPECT_EQ(to_grpc_target("localhost:7070"), "localhost:7070");
  EXPECT_EQ(to_grpc_target(""), "");
}

}  // namespace
}  // namespace qgate::paths
