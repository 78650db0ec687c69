// The series fields to and from the API's messages, by field name (series_fields_message.h).
#include "qgate/jobs/series_fields_message.h"

#include <stdexcept>
#include <string>
#include <variant>

#include <fmt/format.h>

namespace qgate::jobs {

namespace {
using google::protobuf::FieldDescriptor;

/// Whether a message field can carry a stored value: a singular string or integer.
bool carries(const FieldDescriptor& field) {
  if (field.is_repeated()) return false;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_INT32:
      return true;
    default:
      return false;
  }
}

const FieldDescriptor* field_named(const google::protobuf::Descriptor& type, std::string_view name) {
  const FieldDescriptor* field = type.FindFieldByName(std::string(name));
  return field && carries(*field) ? field : nullptr;
}

std::string as_text(const db::StoredValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* number = std::get_if<std::int64_t>(&value)) return std::to_string(*number);
  if (const auto* real = std::get_if<double>(&value)) return fmt::format("{}", *real);
  return "";
}

std::int64_t as_integer(const db::StoredValue& value, std::string_view name) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) return *number;
  if (std::holds_alternative<std::monostate>(value)) return 0;
  throw std::logic_error(fmt::format("series field {} is not an integer, but its message field is", name));
}
}  // namespace

void write_series_fields(const db::SeriesFields& fields, google::protobuf::Message& message) {
  const auto* reflection = message.GetReflection();
  for (const db::SeriesFieldValue& field : db::series_field_values(fields)) {
    const FieldDescriptor* target = field_named(*message.GetDescriptor(), field.name);
    if (!target) continue;
    switch (target->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(&message, target, as_text(field.value));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        reflection->SetInt64(&message, target, as_integer(field.value, field.name));
        break;
      default:  // CPPTYPE_INT32 (carries())
        reflection->SetInt32(&message, target, static_cast<std::int32_t>(as_integer(field.value, field.name)));
        break;
    }
  }
}

db::SeriesFields read_series_fields(const google::protobuf::Message& message) {
  db::SeriesFields fields;
  const auto* reflection = message.GetReflection();
  for (const db::SeriesFieldValue& field : db::series_field_values(fields)) {
    const FieldDescriptor* source = field_named(*message.GetDescriptor(), field.name);
    if (!source) continue;
    switch (source->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        db::set_series_field(fields, field.name, reflection->GetString(message, source));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        db::set_series_field(fields, field.name, reflection->GetInt64(message, source));
        break;
      default:
        db::set_series_field(fields, field.name, std::int64_t{reflection->GetInt32(message, source)});
        break;
    }
  }
  return fields;
}

std::vector<std::string> series_fields_missing_from(const google::protobuf::Descriptor& message) {
  std::vector<std::string> missing;
  for (const db::SeriesFieldValue& field : db::series_field_values(db::SeriesFields{})) {
    if (!field_named(message, field.name)) missing.emplace_back(field.name);
  }
  return missing;
}

}  // namespace qgate::jobs
