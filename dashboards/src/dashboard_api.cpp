// DashboardApi: routes, parameter parsing, the RPC call and the JSON answer in its envelope.
#include "qgate/dashboards/dashboard_api.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <charconv>
#include <chrono>
#include <regex>
#include <set>
#include <stdexcept>

#include "qgate/client/json_report.h"

namespace qgate::dashboards {
namespace {

/// A refusal of the request itself (an unknown or malformed parameter): 400.
struct BadRequest : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

/// The most trend points /api/trend answers (over QueryTrend's pages): four times the widest
/// answer of a 10,000,000-run history (bench/RESULTS.md).
constexpr int kMaxTrendPoints = 100000;

/// The largest integer a JSON reader's double holds exactly, and every one below it: 2^53.
constexpr std::int64_t kExactInJson = std::int64_t(1) << 53;

/// One 64-bit integer as proto's mapping wrote it (a string), as a number when it fits in 2^53.
void integer_as_number(nlohmann::json& value, bool is_unsigned) {
  if (!value.is_string()) return;
  const std::string& text = value.get_ref<const std::string&>();
  if (is_unsigned) {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && v <= std::uint64_t(kExactInJson)) value = v;
  } else {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && v >= -kExactInJson && v <= kExactInJson) value = v;
  }
}

void integers_as_numbers(const Descriptor& type, nlohmann::json& object);

/// One field's value (an element of a repeated field, or a map's value) with its 64-bit integers as numbers.
void value_as_api(const FieldDescriptor& field, nlohmann::json& value) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
      return integer_as_number(value, false);
    case FieldDescriptor::CPPTYPE_UINT64:
      return integer_as_number(value, true);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (value.is_object()) integers_as_numbers(*field.message_type(), value);
      return;
    default:
      return;
  }
}

/// Walks a message's JSON by its descriptor: proto's mapping writes every int64 and uint64 as a
/// string; the API writes those that fit in 2^53 (ids, millisecond times, byte counts) as numbers.
void integers_as_numbers(const Descriptor& type, nlohmann::json& object) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    auto it = object.find(field.name());
    if (it == object.end()) continue;
    if (field.is_map()) {
      const FieldDescriptor& value_field = *field.message_type()->map_value();
      for (auto& [key, value] : it->items()) value_as_api(value_field, value);
    } else if (field.is_repeated()) {
      for (auto& element : *it) value_as_api(field, element);
    } else {
      value_as_api(field, *it);
    }
  }
}

int http_status(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    default:
      return "INTERNAL";
  }
}

/// The query's parameters, each taken at most once; whatever is left over is refused.
class Params {
 public:
  explicit Params(const QueryParams& query) : query_(query) {
    std::set<std::string> seen;
    for (const auto& [name, value] : query)
      if (!seen.insert(name).second) throw BadRequest("parameter '" + name + "' is given twice");
  }

  std::string text(const std::string& name) {
    taken_.insert(name);
    auto it = query_.find(name);
    return it == query_.end() ? "" : it->second;
  }

  std::int64_t integer(const std::string& name) {
    const std::string value = text(name);
    if (value.empty()) return 0;
    std::int64_t out = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size())
      throw BadRequest("parameter '" + name + "' must be an integer, got '" + value + "'");
    return out;
  }

  std::int32_t small_integer(const std::string& name) {
    const std::int64_t v = integer(name);
    if (v < INT32_MIN || v > INT32_MAX) throw BadRequest("parameter '" + name + "' is out of range");
    return static_cast<std::int32_t>(v);
  }

  double real(const std::string& name) {
    const std::string value = text(name);
    if (value.empty()) return 0;
    try {
      size_t used = 0;
      const double out = std::stod(value, &used);
      if (used == value.size()) return out;
    } catch (const std::exception&) {
    }
    throw BadRequest("parameter '" + name + "' must be a number, got '" + value + "'");
  }

  bool flag(const std::string& name) {
    const std::string value = text(name);
    if (value.empty() || value == "0" || value == "false") return false;
    if (value == "1" || value == "true") return true;
    throw BadRequest("parameter '" + name + "' must be true, false, 1 or 0, got '" + value + "'");
  }

  /// Refuses any parameter the route did not take.
  void done() const {
    for (const auto& [name, value] : query_)
      if (!taken_.count(name)) throw BadRequest("unknown parameter '" + name + "'");
  }

 private:
  const QueryParams& query_;
  std::set<std::string> taken_;
};

const std::regex& job_route() {
  static const std::regex re(R"(^/api/jobs/([0-9]{1,18})(/ab|/parity|/cotenant)?$)");
  return re;
}

}  // namespace

DashboardApi::DashboardApi(std::shared_ptr<grpc::ChannelInterface> channel)
    : harness_(v1::Harness::NewStub(channel)), dashboard_(v1::Dashboard::NewStub(channel)) {}

bool DashboardApi::is_route(const std::string& path) {
  static const std::set<std::string> fixed = {"/api/device",  "/api/devices",     "/api/jobs",   "/api/trend",
                                              "/api/changes", "/api/regressions", "/api/compare", "/api/builds"};
  return fixed.count(path) > 0 || std::regex_match(path, job_route());
}

nlohmann::json DashboardApi::to_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) throw std::runtime_error("cannot write " + message.GetTypeName() + " as JSON");
  nlohmann::json json = nlohmann::json::parse(out);
  integers_as_numbers(*message.GetDescriptor(), json);
  return json;
}

std::string DashboardApi::envelope(const std::string& key, nlohmann::json data,
                                   const std::string& authorization) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) context.AddMetadata("authorization", authorization);
  v1::DeviceStatus device;
  const grpc::Status status = harness_->GetDevice(&context, v1::GetDeviceRequest(), &device);
  const client::ReportContext facts =
      status.ok() ? client::report_context(device, QGATE_VERSION)
                  : client::report_context_without_daemon(QGATE_VERSION, "GetDevice: " + status.error_message());
  return client::json_report(facts, key, std::move(data)).dump();
}

ApiResponse DashboardApi::refused(int status, const std::string& code, const std::string& message,
                                  const std::string& authorization) const {
  return {status, envelope("error", {{"code", code}, {"message", message}}, authorization)};
}

ApiResponse DashboardApi::get(const std::string& path, const QueryParams& query,
                              const std::string& authorization) const {
  // One call: its request built from the parameters, its answer written as JSON under `key`: the
  // whole response, or only its `list` field where the response holds nothing else (as the CLI does).
  auto call = [&](auto&& invoke, google::protobuf::Message& response, const std::string& key,
                  const std::string& list = "") -> ApiResponse {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    const grpc::Status status = invoke(&context);
    if (!status.ok())
      return refused(http_status(status.error_code()), code_name(status.error_code()), status.error_message(),
                     authorization);
    nlohmann::json data = to_json(response);
    return {200, envelope(key, list.empty() ? std::move(data) : std::move(data[list]), authorization)};
  };
  try {
    Params p(query);
    if (path == "/api/device") {
      p.done();
      v1::GetDeviceRequest request;
      v1::DeviceStatus response;
      return call([&](grpc::ClientContext* c) { return harness_->GetDevice(c, request, &response); }, response,
                  "device");
    }
    if (path == "/api/devices") {
      // Every GPU of the fleet (`qgate device`): this daemon's live, the others' as last published.
      v1::ListDevicesRequest request;
      request.set_host(p.text("host"));
      p.done();
      v1::ListDevicesResponse response;
      return call([&](grpc::ClientContext* c) { return harness_->ListDevices(c, request, &response); }, response,
                  "devices", "devices");
    }
    if (path == "/api/jobs") {
      v1::ListJobsRequest request;
      request.set_limit(p.small_integer("limit"));
      if (const std::string state = p.text("state"); !state.empty()) {
        v1::JobState parsed;
        if (!v1::JobState_Parse(state, &parsed))
          throw BadRequest("unknown job state '" + state + "' (JOB_STATE_DONE, ...)");
        request.set_state(parsed);
      }
      request.set_host(p.text("host"));
      p.done();
      v1::ListJobsResponse response;
      return call([&](grpc::ClientContext* c) { return harness_->ListJobs(c, request, &response); }, response, "jobs",
                  "jobs");
    }
    if (path == "/api/trend") {
      v1::QueryTrendRequest request;
      request.set_profile(p.text("profile"));
      request.set_weight_type(p.text("weight_type"));
      request.set_path(p.text("path"));
      request.set_build_glob(p.text("build_glob"));
      request.set_since_unix_ms(p.integer("since_unix_ms"));
      request.set_include_contended(p.flag("include_contended"));
      request.set_limit(p.small_integer("limit"));
      request.set_job_id(p.integer("job_id"));
      request.set_raw_runs(p.flag("raw_runs"));
      request.set_host(p.text("host"));
      p.done();
      // The page draws the whole answer at once: the route follows QueryTrend's pages (docs/trends.md,
      // "Pages") up to kMaxTrendPoints, and refuses a longer one rather than cut it.
      v1::QueryTrendResponse response;
      auto every_page = [&](grpc::ClientContext* first) -> grpc::Status {
        grpc::Status status = harness_->QueryTrend(first, request, &response);
        while (status.ok() && !response.next_page_token().empty()) {
          if (response.points_size() >= kMaxTrendPoints)
            return {grpc::StatusCode::INVALID_ARGUMENT,
                    "the trend has more than " + std::to_string(kMaxTrendPoints) +
                        " points: narrow it (since_unix_ms, profile, weight_type) or set limit"};
          grpc::ClientContext context;
          context.set_deadline(first->deadline());
          if (!authorization.empty()) context.AddMetadata("authorization", authorization);
          request.set_page_token(response.next_page_token());
          v1::QueryTrendResponse page;
          status = harness_->QueryTrend(&context, request, &page);
          for (auto& point : *page.mutable_points()) *response.add_points() = std::move(point);
          response.set_next_page_token(page.next_page_token());
        }
        return status;
      };
      return call(every_page, response, "points", "points");
    }
    if (path == "/api/changes" || path == "/api/regressions") {
      // /api/regressions is `qgate regressions`: the same request, slowdowns only, corrected across
      // series by the daemon.
      const bool regressions = path == "/api/regressions";
      v1::QueryChangesRequest request;
      request.set_profile(p.text("profile"));
      request.set_weight_type(p.text("weight_type"));
      request.set_path(p.text("path"));
      request.set_build_glob(p.text("build_glob"));
      request.set_since_unix_ms(p.integer("since_unix_ms"));
      request.set_slowdowns_only(regressions || p.flag("slowdowns_only"));
      request.set_alpha(p.real("alpha"));
      request.set_min_segment(p.small_integer("min_segment"));
      request.set_host(p.text("host"));
      p.done();
      v1::QueryChangesResponse response;
      return call([&](grpc::ClientContext* c) { return harness_->QueryChanges(c, request, &response); },
                  response, regressions ? "regressions" : "changes");
    }
    if (path == "/api/compare") {
      // `qgate compare A B`: the daemon's statistics and verdict per matched series, as the CLI shows them.
      v1::CompareRequest request;
      request.set_build_a(p.text("build_a"));
      request.set_build_b(p.text("build_b"));
      if (request.build_a().empty() || request.build_b().empty())
        throw BadRequest("parameters 'build_a' and 'build_b' (a build's name or id) are both needed");
      request.set_include_contended(p.flag("include_contended"));
      request.set_profile(p.text("profile"));
      request.set_tokens(p.integer("tokens"));
      request.set_weight_type(p.text("weight_type"));
      request.set_same_margin(p.real("same_margin"));
      request.set_host(p.text("host"));
      p.done();
      v1::CompareResponse response;
      return call([&](grpc::ClientContext* c) { return harness_->Compare(c, request, &response); }, response,
                  "compare");
    }
    if (path == "/api/builds") {
      v1::ListBuildsRequest request;
      request.set_name(p.text("name"));
      request.set_limit(p.small_integer("limit"));
      p.done();
      v1::ListBuildsResponse response;
      return call([&](grpc::ClientContext* c) { return harness_->ListBuilds(c, request, &response); }, response,
                  "builds", "builds");
    }
    std::smatch m;
    if (std::regex_match(path, m, job_route())) {
      p.done();
      const std::int64_t id = std::stoll(m[1].str());
      const std::string part = m[2].str();
      if (part.empty()) {
        v1::GetJobRequest request;
        request.set_job_id(id);
        v1::Job response;
        return call([&](grpc::ClientContext* c) { return harness_->GetJob(c, request, &response); }, response,
                    "job");
      }
      v1::JobDetailRequest request;
      request.set_job_id(id);
      if (part == "/ab") {
        v1::AbDetail response;
        return call([&](grpc::ClientContext* c) { return dashboard_->GetAbDetail(c, request, &response); },
                    response, "ab");
      }
      if (part == "/parity") {
        v1::ParityResults response;
        return call([&](grpc::ClientContext* c) { return dashboard_->GetParityResults(c, request, &response); },
                    response, "parity");
      }
      v1::CotenantTimeline response;
      return call([&](grpc::ClientContext* c) { return dashboard_->GetCotenantTimeline(c, request, &response); },
                  response, "cotenant");
    }
    return refused(404, "NOT_FOUND", "no API route " + path, authorization);
  } catch (const BadRequest& e) {
    return refused(400, "INVALID_ARGUMENT", e.what(), authorization);
  } catch (const std::exception& e) {
    return refused(500, "INTERNAL", e.what(), authorization);
  }
}

}  // namespace qgate::dashboards
