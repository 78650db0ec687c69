// libpq, the PostgreSQL client library, opened with dlopen when the first PostgreSQL store opens, so
// that nothing links it: a host that keeps its store in SQLite needs neither libpq nor the libraries
// it loads (docs/fleet.md). <libpq-fe.h> gives the types; the functions come from one table.
#pragma once

#include <libpq-fe.h>

#include <string>

namespace qgate::db::detail {

/// Every libpq function the PostgreSQL engine calls. Adding a call there means adding it here.
#define QGATE_LIBPQ_FUNCTIONS(X) \
  X(PQclear)                     \
  X(PQcmdTuples)                 \
  X(PQconnectdbParams)           \
  X(PQconninfo)                  \
  X(PQconninfoFree)              \
  X(PQconninfoParse)             \
  X(PQerrorMessage)              \
  X(PQexec)                      \
  X(PQexecPrepared)              \
  X(PQfinish)                    \
  X(PQfreemem)                   \
  X(PQftype)                     \
  X(PQgetisnull)                 \
  X(PQgetlength)                 \
  X(PQgetvalue)                  \
  X(PQnfields)                   \
  X(PQntuples)                   \
  X(PQprepare)                   \
  X(PQreset)                     \
  X(PQresultErrorField)          \
  X(PQresultErrorMessage)        \
  X(PQresultStatus)              \
  X(PQsetNoticeProcessor)        \
  X(PQstatus)

/// The functions of one loaded libpq, each member named and typed as libpq declares it.
struct LibpqFunctions {
#define QGATE_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  QGATE_LIBPQ_FUNCTIONS(QGATE_LIBPQ_MEMBER)
#undef QGATE_LIBPQ_MEMBER
};

/// The name libpq is loaded by: its soname since PostgreSQL 8.3, in Debian's package libpq5.
inline constexpr const char* kLibpqSoname = "libpq.so.5";

/// Loads `library` (a dlopen name or path) and resolves every function of LibpqFunctions. Throws
/// SqlEngineError(CannotOpen) saying that the library cannot be loaded and which package has it, or
/// naming the first function it lacks. A loaded library stays loaded for the process's life.
LibpqFunctions load_libpq(const std::string& library);

/// libpq.so.5's functions, loaded by the first call, once per process (thread-safe). Throws
/// load_libpq's SqlEngineError, on every call, when that load failed.
const LibpqFunctions& libpq();

}  // namespace qgate::db::detail
