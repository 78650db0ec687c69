// job_profile: the model profile and token count a job times (job_profile.h).
#include "qgate/jobs/job_profile.h"

#include "qgate/common/weight_types.h"

namespace qgate::jobs {

std::optional<profiles::ModelProfile> job_profile(const v1::JobSpec& spec, const std::string& backend) {
  if (spec.has_custom_profile()) {
    profiles::ModelProfile profile;
    profile.name = spec.custom_profile().name();
    profile.description = "read from a GGUF header";
    for (const auto& g : spec.custom_profile().gemms()) {
      const auto type = quant::parse_type(g.type());
      if (!type) return std::nullopt;
      profile.add_gemm(*type, g.od(), g.k(), g.role(), g.count());
    }
    return profile;
  }
  const std::string name = !spec.profile().empty() ? spec.profile() : backend == "cpu" ? "cpu-tiny" : "llama-7b-q4_K_M";
  const profiles::ModelProfile* builtin = profiles::find_builtin_profile(name);
  if (!builtin) return std::nullopt;
  return *builtin;
}

int64_t job_tokens(const v1::JobSpec& spec, const profiles::ModelProfile& profile) {
  return spec.tokens() > 0 ? spec.tokens() : profile.default_tokens;
}

}  // namespace qgate::jobs
