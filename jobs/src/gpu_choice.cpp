// The GPU choice of a job: checked against the served GPUs, and the queue it goes to.
#include "qgate/jobs/gpu_choice.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "qgate/common/gpu_routing.h"
#include "qgate/jobs/application_error.h"

namespace qgate::jobs {
namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw ApplicationError(ApplicationErrorKind::InvalidArgument, message);
}

std::string served_list(const std::map<int, std::string>& served) {
  std::string out;
  for (const auto& [ordinal, name] : served) out += (out.empty() ? "" : ", ") + std::to_string(ordinal) + " (" + name + ")";
  return out;
}

}  // namespace

int queued_device(const v1::JobSpec& spec) {
  if (spec.gpus_size() == 0) return kAnyGpu;
  if (spec.split_gpus() && spec.gpus_size() != 2) return kAnyGpu;
  return spec.gpus(0);
}

void check_gpu_routing(const v1::JobSpec& spec, const JobPolicy& options) {
  if (!spec.gpu_model().empty())
    if (const auto why = invalid_gpu_model(spec.gpu_model())) refuse("gpu_model: " + *why);
  if (spec.gpu_uuid().size() > 128 || spec.gpu_uuid().find_first_of(" \t\n,") != std::string::npos)
    refuse("gpu_uuid: a GPU uuid is at most 128 characters without spaces or commas, e.g. GPU-5c7f...");
  for (const std::string& label : spec.labels())
    if (const auto why = invalid_label(label)) refuse(*why);
  // On a store of its own this daemon is the only one to take the job: one it cannot run is refused
  // now, not left in the queue for ever. In a fleet another daemon may take it.
  if (options.fleet) return;
  std::vector<ServedDevice> served = options.served;
  if (served.empty()) served.push_back(ServedDevice{options.gpu, options.backend, ""});
  bool any = false;
  std::string names;
  for (const ServedDevice& d : served) {
    names += (names.empty() ? "" : ", ") + d.name;
    any = any || (gpu_is_model(d.name, spec.gpu_model()) && (spec.gpu_uuid().empty() || spec.gpu_uuid() == d.uuid));
  }
  if (!any) {
    std::string wanted = spec.gpu_model().empty() ? "" : "GPU model " + spec.gpu_model();
    if (!spec.gpu_uuid().empty()) wanted += (wanted.empty() ? "GPU " : " and GPU ") + spec.gpu_uuid();
    refuse("the job asks for " + wanted + " and this daemon serves " + names + " (its store is its own: no other daemon takes jobs from it)");
  }
  for (const std::string& label : spec.labels()) {
    if (std::find(options.labels.begin(), options.labels.end(), label) == options.labels.end()) {
      std::string have;
      for (const std::string& l : options.labels) have += (have.empty() ? "" : ", ") + l;
      refuse("the job asks for label '" + label + "' and this daemon carries " +
             (have.empty() ? std::string("none (qgated --label)") : have) +
             " (its store is its own: no other daemon takes jobs from it)");
    }
  }
}

void check_gpu_choice(const v1::JobSpec& spec, const JobPolicy& options) {
  check_gpu_routing(spec, options);
  std::map<int, std::string> served;
  for (const auto& d : options.served) served[d.ordinal] = d.name;
  if (served.empty()) served[options.gpu] = options.backend;
  std::set<int> named;
  for (int ordinal : spec.gpus()) {
    if (!served.count(ordinal))
      refuse("GPU " + std::to_string(ordinal) + " is not served by this daemon; it serves GPU " + served_list(served));
    if (!named.insert(ordinal).second) refuse("GPU " + std::to_string(ordinal) + " is named twice");
  }
  if (!spec.split_gpus()) {
    if (spec.gpus_size() > 1)
      refuse("a job runs on one GPU: name one with --gpu, or run the arms on two with --split-gpus");
    return;
  }
  if (spec.kind() != v1::JOB_KIND_GATE && spec.kind() != v1::JOB_KIND_AB && spec.kind() != v1::JOB_KIND_COMMAND)
    refuse("--split-gpus runs the two arms of an A/B on two GPUs; a parity job has no arms");
  if (spec.order() == v1::RUN_ORDER_SEQUENTIAL) refuse("--split-gpus runs the arms at once; it has no sequential order");
  if (served.size() < 2 && !options.fleet)
    refuse("--split-gpus needs two GPUs of one model and this daemon serves one: GPU " + served_list(served) +
           " (start it with --gpus)");
  if (spec.gpus_size() != 0 && spec.gpus_size() != 2)
    refuse("--split-gpus takes a pair: name two GPUs, or none for any two of one model");
  if (spec.gpus_size() == 2) {
    const std::string& x = served[spec.gpus(0)];
    const std::string& y = served[spec.gpus(1)];
    if (x != y)
      refuse("--split-gpus needs two identical GPUs: GPU " + std::to_string(spec.gpus(0)) + " is " + x + ", GPU " +
             std::to_string(spec.gpus(1)) + " is " + y);
    return;
  }
  if (options.fleet) return;  // any daemon serving two GPUs of one model may take it
  std::map<std::string, int> per_model;
  for (const auto& [ordinal, name] : served) ++per_model[name];
  for (const auto& [name, count] : per_model)
    if (count >= 2) return;
  refuse("--split-gpus needs two identical GPUs and no two served GPUs are of one model: " + served_list(served));
}

}  // namespace qgate::jobs
