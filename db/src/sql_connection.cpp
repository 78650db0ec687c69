// What every engine's statements share: reading a column as an integer or as text.
#include "detail/sql_connection.h"

#include <stdexcept>

#include <fmt/format.h>

namespace qgate::db::detail {

std::int64_t SqlStatement::int64(int column) const {
  const StoredValue read = value(column);
  if (const auto* i = std::get_if<std::int64_t>(&read)) return *i;
  if (const auto* d = std::get_if<double>(&read)) return static_cast<std::int64_t>(*d);
  if (const auto* s = std::get_if<std::string>(&read)) return std::stoll(*s);
  return 0;
}

std::int64_t SqlStatement::exec_returning_key() {
  if (!step()) throw std::logic_error("an INSERT ... RETURNING returned no row");
  const std::int64_t key = int64(0);
  while (step()) {
  }
  return key;
}

double SqlStatement::real(int column) const {
  const StoredValue read = value(column);
  if (const auto* i = std::get_if<std::int64_t>(&read)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&read)) return *d;
  if (const auto* s = std::get_if<std::string>(&read)) return std::stod(*s);
  return 0;
}

std::string SqlStatement::text(int column) const {
  const StoredValue read = value(column);
  if (const auto* i = std::get_if<std::int64_t>(&read)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&read)) return fmt::format("{}", *d);
  if (const auto* s = std::get_if<std::string>(&read)) return *s;
  return "";
}

}  // namespace qgate::db::detail
