// The model profile a job times: its spec's custom profile (read from a GGUF header when it was
// submitted), else a built-in one by name, else the backend's default. One home for that choice,
// used when a job is submitted (to size it) and when it runs.
#pragma once

#include <optional>
#include <string>

#include "qgate/profiles/model_profile.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// nullopt when the spec names a profile that is not built in.
std::optional<profiles::ModelProfile> job_profile(const v1::JobSpec& spec, const std::string& backend);

/// The tokens a job's pass runs: the spec's, else the profile's default.
int64_t job_tokens(const v1::JobSpec& spec, const profiles::ModelProfile& profile);

}  // namespace qgate::jobs
