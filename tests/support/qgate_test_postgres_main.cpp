// qgate-test-postgres start|stop DIR: the ctest fixture that starts and stops the PostgreSQL server
// the POSTGRES tests share (see postgres_fixture.h).
#include <exception>
#include <iostream>
#include <string_view>

#include "postgres_fixture.h"

int main(int argc, char** argv) {
  const std::string_view command = argc == 3 ? argv[1] : "";
  if (command != "start" && command != "stop") {
    std::cerr << "usage: qgate-test-postgres start|stop DIR\n";
    return 2;
  }
  try {
    return command == "start" ? qgate::test_support::start_fixture_server(argv[2])
                              : qgate::test_support::stop_fixture_server(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "qgate-test-postgres " << command << ": " << e.what() << '\n';
    return 1;
  }
}
