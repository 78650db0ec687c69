# Finds the Debian packages qgate builds with (scripts/install-deps.sh installs them).
# Debian's protobuf has no CMake config package: module mode first, then gRPC's config.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(SQLiteCpp REQUIRED)
# libpq, the PostgreSQL client library (target PostgreSQL::PostgreSQL): the PostgreSQL store takes
# only its header (it loads libpq.so.5 at run time, db/src/detail/libpq_library.h); the tests'
# throwaway server (tests/support/test_postgres.h) and the tests that read the database link it.
find_package(PostgreSQL REQUIRED)
if(QGATE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
