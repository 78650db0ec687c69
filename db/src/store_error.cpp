// Names of StoreErrorKind, for logs and messages.
#include "qgate/db/store_error.h"

namespace qgate::db {

std::string_view to_string(StoreErrorKind kind) {
  switch (kind) {
    case StoreErrorKind::Other: return "other";
    case StoreErrorKind::NotFound: return "not_found";
    case StoreErrorKind::Constraint: return "constraint";
    case StoreErrorKind::ReadOnly: return "read_only";
    case StoreErrorKind::Busy: return "busy";
    case StoreErrorKind::Full: return "full";
    case StoreErrorKind::Corrupt: return "corrupt";
    case StoreErrorKind::SchemaTooNew: return "schema_too_new";
    case StoreErrorKind::InvalidValue: return "invalid_value";
    case StoreErrorKind::CannotOpen: return "cannot_open";
    case StoreErrorKind::Io: return "io";
  }
  return "unknown";
}

}  // namespace qgate::db
