// The one seam between the series fields (db::SeriesFields, declared once in the store) and the API's
// messages: a message's fields named like a series field are filled from it and read into it, so a new
// series field reaches TrendPoint, CompareRow and ExternalResult with a field of its name in the proto
// and no code here (docs/architecture.md, "One declaration per fact").
#pragma once

#include <google/protobuf/message.h>

#include "qgate/db/records.h"

namespace qgate::jobs {

/// Sets each field of `message` that is named like a series field (profile, weight_type, path,
/// tokens, ...) from `fields`; none is written as "" or 0. Fields the message lacks are skipped.
void write_series_fields(const db::SeriesFields& fields, google::protobuf::Message& message);

/// The series fields from `message`'s fields of the same names; "" is none for an optional field.
db::SeriesFields read_series_fields(const google::protobuf::Message& message);

/// The series fields that `message`'s type has no field for (each of its kind: string or integer).
std::vector<std::string> series_fields_missing_from(const google::protobuf::Descriptor& message);

}  // namespace qgate::jobs
