// Loading libpq at run time (detail/libpq_library.h): dlopen once, then dlsym for each function of
// the table; what goes wrong becomes a CannotOpen naming the library and the package that has it.
#include "detail/libpq_library.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include <fmt/format.h>

#include "detail/sql_checked.h"

namespace qgate::db::detail {

namespace {

/// Where a host gets libpq: the package, and that only a PostgreSQL store needs it.
constexpr const char* kLibpqRemedy =
    "install the Debian package libpq5 on this host (only a postgresql:// store needs it)";

std::string dl_error() {
  const char* error = dlerror();
  return error ? error : "no reason given";
}

}  // namespace

LibpqFunctions load_libpq(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    throw SqlEngineError(StoreErrorKind::CannotOpen,
                         fmt::format("the PostgreSQL client library {} could not be loaded ({}); {}", library,
                                     dl_error(), kLibpqRemedy),
                         "libpq");
  }
  LibpqFunctions functions;
  std::string missing;
  auto resolve = [&](auto& function, const char* name) {
    if (!missing.empty()) return;
    dlerror();  // clear: only a failure after this dlsym counts
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, name));
    if (!function) missing = fmt::format("{} ({})", name, dl_error());
  };
#define QGATE_LIBPQ_RESOLVE(name) resolve(functions.name, #name);
  QGATE_LIBPQ_FUNCTIONS(QGATE_LIBPQ_RESOLVE)
#undef QGATE_LIBPQ_RESOLVE
  if (!missing.empty()) {
    dlclose(handle);
    throw SqlEngineError(StoreErrorKind::CannotOpen,
                         fmt::format("the PostgreSQL client library {} lacks the function {}; {}", library,
                                     missing, kLibpqRemedy),
                         "libpq");
  }
  return functions;  // the handle stays open: the functions are used until the process exits
}

const LibpqFunctions& libpq() {
  static std::once_flag once;
  static LibpqFunctions functions;
  static StoreErrorKind error_kind = StoreErrorKind::Other;
  static std::string error;  // empty once loaded
  std::call_once(once, [] {
    try {
      functions = load_libpq(kLibpqSoname);
    } catch (const SqlEngineError& failure) {
      error_kind = failure.kind();
      error = failure.what();
    }
  });
  if (!error.empty()) throw SqlEngineError(error_kind, error, "libpq");
  return functions;
}

}  // namespace qgate::db::detail
