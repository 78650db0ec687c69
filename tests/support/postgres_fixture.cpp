// The ctest fixture `postgres`: starting the shared server and stopping it (see postgres_fixture.h).
#include "postgres_fixture.h"

#include <fstream>
#include <iostream>
#include <stdexcept>

#include "test_postgres.h"

namespace qgate::test_support {

namespace {

namespace fs = std::filesystem;

fs::path conninfo_file(const fs::path& state_dir) { return state_dir / "conninfo"; }
fs::path server_dir_file(const fs::path& state_dir) { return state_dir / "server_dir"; }

// Written whole or not at all: a test never reads half a file.
void write_file(const fs::path& path, const std::string& text) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << text << '\n';
    if (!out.flush()) throw std::runtime_error("cannot write " + partial.string());
  }
  fs::rename(partial, path);
}

std::string recorded_server_dir(const fs::path& state_dir) {
  std::ifstream in(server_dir_file(state_dir));
  std::string dir;
  std::getline(in, dir);
  return dir;
}

}  // namespace

int start_fixture_server(const fs::path& state_dir) {
  fs::create_directories(state_dir);
  stop_fixture_server(state_dir);
  auto server = TestPostgres::start_private();
  if (!server->available()) {
    write_file(conninfo_file(state_dir), std::string(kUnavailablePrefix) + server->why_unavailable());
    std::cout << "postgres fixture: skipped, " << server->why_unavailable() << '\n';
    return kFixtureSkipExitCode;
  }
  // The directory first: a stop after a failure here still finds the server.
  write_file(server_dir_file(state_dir), server->server_dir().string());
  write_file(conninfo_file(state_dir), server->conninfo());
  std::cout << "postgres fixture: server in " << server->server_dir().string() << ", " << server->conninfo()
            << '\n';
  server->release();
  return 0;
}

int stop_fixture_server(const fs::path& state_dir) {
  const std::string server_dir = recorded_server_dir(state_dir);
  if (!server_dir.empty()) {
    TestPostgres::stop_released(server_dir);
    std::cout << "postgres fixture: stopped the server in " << server_dir << '\n';
  }
  fs::remove(server_dir_file(state_dir));
  fs::remove(conninfo_file(state_dir));
  return 0;
}

}  // namespace qgate::test_support
