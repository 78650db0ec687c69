// Conversions between the store's rows (qgate::db) and the API's messages (qgate.v1).
#pragma once

#include <optional>
#include <string>

#include "qgate/db/records.h"
#include "qgate/db/store.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

std::string spec_to_json(const v1::JobSpec& spec);
v1::JobSpec spec_from_json(const std::string& json);
std::string report_to_json(const v1::VerdictReport& report);
std::optional<v1::VerdictReport> report_from_json(const std::string& json);

v1::JobState to_proto(db::JobState state);
std::optional<db::JobState> from_proto(v1::JobState state);
v1::Build to_proto(const db::Build& build);
/// The job with its builds, progress and (when finished) verdict report.
v1::Job to_proto(db::Store& store, const db::Job& job);
const char* kind_name(v1::JobKind kind);

/// jobs.progress_json holds {"progress": JobProgress, "report": VerdictReport}, and once the job
/// has ended its "disposition" (the enum's name) and "disposition_detail".
std::string progress_json(const v1::JobProgress& progress, const v1::VerdictReport* report,
                          v1::Disposition disposition = v1::DISPOSITION_UNSPECIFIED, const std::string& detail = "");
/// A stored progress_json with the disposition set (a blob that does not parse is replaced).
std::string with_disposition(const std::string& progress_json, v1::Disposition disposition, const std::string& detail);

}  // namespace qgate::server
