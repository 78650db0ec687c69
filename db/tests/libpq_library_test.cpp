// Tests of the libpq loader (detail/libpq_library.h), in a binary that does not link libpq: a host
// without the library is told at open, as CannotOpen, what is missing and which package has it; a
// library without libpq's functions is named with the first one it lacks; libpq.so.5 itself loads
// once, from any number of threads, and its functions work through the table.
#include "detail/libpq_library.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "detail/postgres_connection.h"
#include "detail/sql_checked.h"
#include "qgate/db/store_error.h"

namespace qgate::db::detail {
namespace {

constexpr const char* kAbsentLibrary = "libqgate-no-such-libpq.so.5";

TEST(LibpqLibrary, AnAbsentLibraryIsCannotOpenNamingItAndItsPackage) {
  try {
    load_libpq(kAbsentLibrary);
    FAIL() << "loaded " << kAbsentLibrary;
  } catch (const SqlEngineError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), StoreErrorKind::CannotOpen) << message;
    EXPECT_NE(message.find(std::string("PostgreSQL client library ") + kAbsentLibrary + " could not be loaded"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Debian package libpq5"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot open shared object file"), std::string::npos) << message;  // dlopen's reason
  }
}

TEST(LibpqLibrary, OpeningAStoreWithoutLibpqFailsAtOpenBeforeAnyConnection) {
  // An address nothing listens on: had the engine tried to connect, the message would say so.
  PostgresOptions options;
  options.address = "postgresql://qgate@127.0.0.1:1/qgate";
  options.connect_timeout_s = 1;
  try {
    checked_sql("open", "postgresql", [&] { return open_postgres_connection(options, kAbsentLibrary); });
    FAIL() << "opened without " << kAbsentLibrary;
  } catch (const StoreError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), StoreErrorKind::CannotOpen) << message;
    EXPECT_NE(message.find(std::string(kAbsentLibrary) + " could not be loaded"), std::string::npos) << message;
    EXPECT_NE(message.find("libpq5"), std::string::npos) << message;
    EXPECT_EQ(message.find("cannot connect"), std::string::npos) << message;
  }
}

TEST(LibpqLibrary, ALibraryWithoutLibpqsFunctionsIsNamedWithTheFirstItLacks) {
  try {
    load_libpq("libc.so.6");  // loaded in every process, and no PostgreSQL client
    FAIL() << "libc.so.6 passed for libpq";
  } catch (const SqlEngineError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), StoreErrorKind::CannotOpen) << message;
    EXPECT_NE(message.find("libc.so.6 lacks the function PQclear"), std::string::npos) << message;
    EXPECT_NE(message.find("libpq5"), std::string::npos) << message;
  }
}

TEST(LibpqLibrary, LibpqSo5ResolvesEveryFunctionAndTheyWork) {
  const LibpqFunctions functions = load_libpq(kLibpqSoname);
#define QGATE_EXPECT_RESOLVED(name) EXPECT_NE(functions.name, nullptr) << #name;
  QGATE_LIBPQ_FUNCTIONS(QGATE_EXPECT_RESOLVED)
#undef QGATE_EXPECT_RESOLVED
  char* error = nullptr;
  PQconninfoOption* options = functions.PQconninfoParse("host=db.example dbname=qgate", &error);
  ASSERT_NE(options, nullptr) << (error ? error : "");
  std::string host;
  for (PQconninfoOption* option = options; option->keyword; ++option)
    if (std::string(option->keyword) == "host" && option->val) host = option->val;
  functions.PQconninfoFree(options);
  EXPECT_EQ(host, "db.example");
}

TEST(LibpqLibrary, TheProcessLoadsLibpqOnceWhicheverThreadsAskFirst) {
  std::vector<const LibpqFunctions*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = &libpq(); });
  for (std::thread& thread : threads) thread.join();
  for (const LibpqFunctions* functions : seen) {
    ASSERT_EQ(functions, seen.front());
    EXPECT_NE(functions->PQconnectdbParams, nullptr);
  }
  EXPECT_EQ(&libpq(), seen.front());
}

}  // namespace
}  // namespace qgate::db::detail
