// What the qgate CLI prints (see format.h). Pure: no I/O, no clock; "now" is passed in.
#include "qgate/client/format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

#include "qgate/client/exit_codes.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"
#include "qgate/v1/state_words.h"
#include "qgate/v1/verdict_words.h"

namespace qgate::client {

// ---- generic pieces ----

std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;  // skip continuation bytes
  return width;
}

namespace {

std::string pad(const std::string& text, std::size_t width, bool right) {
  const std::size_t w = display_width(text);
  if (w >= width) return text;
  const std::string fill(width - w, ' ');
  return right ? fill + text : text + fill;
}

void trim_right(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

}  // namespace

std::string format_table(const Table& table) {
  std::size_t columns = table.headers.size();
  for (const auto& row : table.rows) columns = std::max(columns, row.size());
  std::vector<std::size_t> widths(columns, 0);
  auto measure = [&widths](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i)
      widths[i] = std::max(widths[i], display_width(cells[i]));
  };
  measure(table.headers);
  for (const auto& row : table.rows) measure(row);

  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < columns; ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const bool right = i < table.right_align.size() && table.right_align[i];
      if (i > 0) out += "  ";
      out += pad(cell, widths[i], right);
    }
    trim_right(out);
    return out + "\n";
  };
  std::string out = table.headers.empty() ? "" : line(table.headers);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

std::string format_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, display_width(key));
  std::string out;
  for (const auto& [key, value] : fields) {
    std::string line = pad(key, width, false) + "  " + value;
    trim_right(line);
    out += line + "\n";
  }
  return out;
}

std::string format_duration(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m {}s", seconds / 60, seconds % 60);
  if (seconds < 86400) return fmt::format("{}h {}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}d {}h", seconds / 86400, seconds % 86400 / 3600);
}

std::string format_age(std::int64_t now_ms, std::int64_t then_ms) {
  if (then_ms == 0) return "-";
  return format_duration((now_ms - then_ms) / 1000);
}

std::string format_bytes(std::int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  value /= 1024.0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string format_timestamp(std::int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%SZ", &tm);
  return text;
}

std::string format_ratio(double ratio) {
  if (ratio == 0.0) return "-";
  return fmt::format("{:.3f}", ratio);
}

std::string format_interval(double low, double high) {
  if (low == 0.0 && high == 0.0) return "-";
  // An early look with few pairs spends almost no error: its interval on the ratio can end past any
  // sensible speed-up. Beyond 1000x it says only that the look cannot bound the ratio.
  if (!(high <= 1000.0)) return fmt::format("[{:.3f}, unbounded]", low);
  return fmt::format("[{:.3f}, {:.3f}]", low, high);
}

std::string format_tokens_per_s(double tokens_per_s) {
  if (tokens_per_s == 0.0) return "-";
  return fmt::format("{:.1f}", tokens_per_s);
}

std::string sparkline(const std::vector<double>& values, double low, double high) {
  static constexpr const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string out;
  for (const double v : values) {
    int level = 3;
    if (high > low) {
      const double t = std::clamp((v - low) / (high - low), 0.0, 1.0);
      level = static_cast<int>(std::lround(t * 7.0));
    }
    out += kBars[level];
  }
  return out;
}

std::string sparkline(const std::vector<double>& values) {
  if (values.empty()) return "";
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return sparkline(values, *lo, *hi);
}

std::string csv_field(const std::string& field) {
  const bool needs_quotes = field.find_first_of(",\"\r\n") != std::string::npos ||
                            (!field.empty() && (field.front() == ' ' || field.back() == ' '));
  if (!needs_quotes) return field;
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_row(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_field(fields[i]);
  }
  return out + "\n";
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

// ---- enums ----

std::string state_name(v1::JobState state) { return std::string(words::state_word(state)); }

std::string verdict_name(v1::Verdict verdict) { return std::string(words::verdict_word(verdict)); }

std::string comparison_name(v1::Comparison c) { return std::string(words::comparison_word(c)); }

std::string disposition_name(v1::Disposition d) {
  if (d == v1::DISPOSITION_UNSPECIFIED) return "-";
  std::string word(words::disposition_word(d));
  for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return word;
}

std::string disposition_suffix(const v1::Job& job) {
  if (job.disposition() == v1::DISPOSITION_UNSPECIFIED) return "";
  return " (" + disposition_name(job.disposition()) +
         (job.disposition_detail().empty() ? "" : ": " + job.disposition_detail()) + ")";
}

// ---- exit codes ----

int exit_code_for(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_PASS: return kExitPass;
    case v1::VERDICT_FAIL: return kExitFail;
    case v1::VERDICT_INCONCLUSIVE: return kExitInconclusive;
    default: return kExitError;
  }
}

int exit_code_for(const v1::Job& job) {
  if (job.state() != v1::JOB_STATE_DONE) return kExitError;
  return exit_code_for(job.verdict().verdict());
}

// ---- JSON ----

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  if (i < bytes.size()) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

nlohmann::json field_value(const Message& m, const Reflection& r, const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64: return r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32: return r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64: return r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return r.GetDouble(m, &f);
    case FieldDescriptor::CPPTYPE_FLOAT: return r.GetFloat(m, &f);
    case FieldDescriptor::CPPTYPE_BOOL: return r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM: return r.GetEnum(m, &f)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return f.type() == FieldDescriptor::TYPE_BYTES ? base64(r.GetString(m, &f))
                                                     : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_MESSAGE: return to_json(r.GetMessage(m, &f));
  }
  return nullptr;
}

nlohmann::json repeated_value(const Message& m, const Reflection& r, const FieldDescriptor& f,
                              int i) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r.GetRepeatedInt32(m, &f, i);
    case FieldDescriptor::CPPTYPE_INT64: return r.GetRepeatedInt64(m, &f, i);
    case FieldDescriptor::CPPTYPE_UINT32: return r.GetRepeatedUInt32(m, &f, i);
    case FieldDescriptor::CPPTYPE_UINT64: return r.GetRepeatedUInt64(m, &f, i);
    case FieldDescriptor::CPPTYPE_DOUBLE: return r.GetRepeatedDouble(m, &f, i);
    case FieldDescriptor::CPPTYPE_FLOAT: return r.GetRepeatedFloat(m, &f, i);
    case FieldDescriptor::CPPTYPE_BOOL: return r.GetRepeatedBool(m, &f, i);
    case FieldDescriptor::CPPTYPE_ENUM: return r.GetRepeatedEnum(m, &f, i)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return f.type() == FieldDescriptor::TYPE_BYTES ? base64(r.GetRepeatedString(m, &f, i))
                                                     : r.GetRepeatedString(m, &f, i);
    case FieldDescriptor::CPPTYPE_MESSAGE: return to_json(r.GetRepeatedMessage(m, &f, i));
  }
  return nullptr;
}

}  // namespace

nlohmann::json to_json(const Message& message) {
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor& f = *descriptor->field(i);
    if (f.is_repeated()) {
      nlohmann::json list = nlohmann::json::array();
      for (int j = 0; j < reflection->FieldSize(message, &f); ++j)
        list.push_back(repeated_value(message, *reflection, f, j));
      out[f.name()] = std::move(list);
    } else if (f.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f.containing_oneof()) {
      // Absent sub-messages and unset oneof members are left out, not shown as empty defaults.
      if (reflection->HasField(message, &f)) out[f.name()] = field_value(message, *reflection, f);
    } else {
      out[f.name()] = field_value(message, *reflection, f);
    }
  }
  return out;
}

// ---- views of qgate's messages ----

namespace {

/// The phase as a reader names it: "ab" is a job's timed runs, whatever the job's kind.
std::string phase_name(const std::string& phase) {
  if (phase == "ab") return "timed runs";
  if (phase == "parity") return "parity sweep";
  return phase;
}

}  // namespace

std::string progress_line(std::int64_t job_id, v1::JobState state,
                          const v1::JobProgress& progress) {
  std::string head = fmt::format("job {} {}", job_id, state_name(state));
  if (!progress.phase().empty() && progress.phase() != state_name(state))
    head += fmt::format(" ({})", phase_name(progress.phase()));
  std::vector<std::string> parts;
  if (progress.parity_total() > 0)
    parts.push_back(fmt::format("parity {}/{}", progress.parity_done(), progress.parity_total()));
  if (progress.pairs_max() > 0 || progress.pairs_done() > 0)
    parts.push_back(fmt::format("pairs {}/{}", progress.pairs_done(), progress.pairs_max()));
  if (progress.ratio() != 0.0) {
    std::string ratio = "ratio " + format_ratio(progress.ratio());
    if (progress.ci_low() != 0.0 || progress.ci_high() != 0.0)
      ratio += " " + format_interval(progress.ci_low(), progress.ci_high());
    parts.push_back(std::move(ratio));
  }
  if (!progress.message().empty()) parts.push_back(progress.message());
  if (parts.empty()) return head;
  std::string out = head + ":";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? " " : ", ") + parts[i];
  return out;
}

std::string tokens_per_s_note(v1::TimingMode timing) {
  if (timing == v1::TIMING_MODE_PASS)
    return "tok/s = prefill throughput of the profile's linear layers (prompt tokens / the median time "
           "of a whole pass over them, in order)";
  return "tok/s = prefill throughput of the profile's linear layers (prompt tokens / summed GEMM "
         "time)";
}

namespace {

/// What tok/s means in a table that mixes series: qgate's kernel series, command series and imports.
std::string series_tokens_per_s_note() {
  return tokens_per_s_note() + "; a run timed on whole passes (timing pass) carries its median pass; a command "
         "series (path VAR=value, command-a/b) carries its command's own figure, an imported one its tool's";
}

}  // namespace

namespace {

std::string arm_line(const v1::ArmSummary& arm) {
  return fmt::format("{} tok/s over {} runs{}", format_tokens_per_s(arm.tokens_per_s()),
                     arm.runs(), arm.label().empty() ? "" : " (" + arm.label() + ")");
}

}  // namespace

std::string format_verdict_report(const v1::VerdictReport& report, v1::JobKind kind, v1::TimingMode timing) {
  // A parity job runs no A/B, and a gate whose sweep failed stops before it: their report is the
  // sweep's, with no comparison, arms or tok/s to show.
  const bool ab_ran =
      report.pairs() > 0 || report.ratio() != 0.0 || report.arm_a().runs() > 0 || report.arm_b().runs() > 0;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string verdict = verdict_name(report.verdict());
  if (ab_ran && report.comparison() != v1::COMPARISON_UNSPECIFIED)
    verdict += " (" + comparison_name(report.comparison()) + ")";
  fields.emplace_back("verdict", verdict);
  if (ab_ran) {
    std::string ratio = format_ratio(report.ratio());
    if (report.ratio() != 0.0) {
      ratio += "  95% interval " + format_interval(report.ci_low(), report.ci_high());
      if (report.p_value() > 0.0) ratio += fmt::format("  p={:.3g}", report.p_value());
    }
    fields.emplace_back("ratio A/B", ratio);
    fields.emplace_back("arm A", arm_line(report.arm_a()));
    fields.emplace_back("arm B", arm_line(report.arm_b()));
    fields.emplace_back("pairs",
                        fmt::format("{} ({} contended)", report.pairs(), report.contended_pairs()));
  } else if (kind != v1::JOB_KIND_PARITY) {
    fields.emplace_back("timed runs", report.parity_failed() > 0 ? "not run: the parity sweep failed" : "not run");
  }
  if (report.parity_passed() + report.parity_failed() > 0)
    fields.emplace_back("parity", fmt::format("{} passed, {} failed", report.parity_passed(),
                                              report.parity_failed()));
  if (const v1::OutputIdentity& identity = report.identity(); identity.checked())
    fields.emplace_back("output", identity.identical() ? "identical: " + identity.detail()
                                                       : "DIFFERENT: " + identity.detail());
  if (ab_ran) {
    std::string profile = report.profile().empty() ? "-" : report.profile();
    if (report.tokens() > 0) profile += fmt::format(", {} tokens", report.tokens());
    if (!report.backend().empty()) profile += ", backend " + report.backend();
    fields.emplace_back("profile", profile);
  } else if (!report.backend().empty()) {
    fields.emplace_back("backend", report.backend());
  }
  if (report.gpus_size() > 0) {
    std::string gpus;
    for (const auto& g : report.gpus()) gpus += (gpus.empty() ? "" : " and ") + format_gpu(g);
    fields.emplace_back(report.gpus_size() > 1 ? "gpus" : "gpu", gpus);
  }
  if (report.has_split()) {
    const v1::SplitGpus& s = report.split();
    fields.emplace_back("split", fmt::format("{} blocks of two pairs, arms swapping GPUs; GPU {} / GPU {} speed {}  95% "
                                             "interval {}",
                                             s.blocks(), s.first().ordinal(), s.second().ordinal(),
                                             format_ratio(s.gpu_ratio()), format_interval(s.gpu_ci_low(), s.gpu_ci_high())));
    if (s.is_calibration())
      fields.emplace_back("calibration", "this job: an A/A of the pair");
    else if (s.calibration_job_id() == 0)
      fields.emplace_back("calibration", "none: the pair has no A/A yet");
    else
      fields.emplace_back("calibration",
                          fmt::format("job {}: A/A {} ratio {} {}; GPU speed then {}", s.calibration_job_id(),
                                      comparison_name(s.calibration_comparison()), format_ratio(s.calibration_ratio()),
                                      format_interval(s.calibration_ci_low(), s.calibration_ci_high()),
                                      format_ratio(s.calibration_gpu_ratio())));
  }
  std::string out = format_fields(fields);

  if (report.per_type_size() > 0) {
    Table table{{"TYPE", "RATIO A/B", "95% INTERVAL", "COMPARISON", "GEMM us A", "GEMM us B"},
                {false, true, true, false, true, true},
                {}};
    for (const auto& t : report.per_type())
      table.rows.push_back({t.weight_type(), format_ratio(t.ratio()),
                            format_interval(t.ci_low(), t.ci_high()),
                            comparison_name(t.comparison()),
                            t.gemm_us_a() == 0.0 ? "-" : fmt::format("{:.1f}", t.gemm_us_a()),
                            t.gemm_us_b() == 0.0 ? "-" : fmt::format("{:.1f}", t.gemm_us_b())});
    out += "\n" + format_table(table);
    if (timing == v1::TIMING_MODE_PASS)
      out += "per type: each GEMM timed alone; the ratio above times whole passes, so what a build gains "
             "or loses between its GEMMs shows there only\n";
  }
  if (report.leaks_size() > 0) {
    out += "\nmemory kept by the build:\n";
    for (const auto& leak : report.leaks())
      out += fmt::format("  - {}{}: device {}, host {}: {}\n", leak.where(), leak.kept_once() ? " (kept once, not a leak)" : "",
                         format_bytes(leak.device_bytes()), format_bytes(leak.host_bytes()), leak.detail());
  }
  if (report.reasons_size() > 0) {
    out += "\nreasons:\n";
    for (const auto& reason : report.reasons()) out += "  - " + reason + "\n";
  }
  // A command job's tok/s is the command's own figure; its reasons say how it was read.
  if (ab_ran && kind != v1::JOB_KIND_COMMAND) out += "\n" + tokens_per_s_note(timing) + "\n";
  return out;
}

namespace {

/// "a" or "an" before a GPU model as it is read aloud: a code or initialism by its first letter's
/// name ("an H200", "an RTX 4090", "a GH200"), a word by its first sound ("a Tesla", "an Instinct").
std::string article_for(const std::string& model) {
  const std::string first_word = model.substr(0, model.find(' '));
  auto letters = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  auto lower = [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; };
  const bool word = first_word.size() >= 4 && std::all_of(first_word.begin(), first_word.end(), letters) &&
                    std::any_of(first_word.begin(), first_word.end(), lower);
  const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(model.empty() ? 'x' : model.front())));
  const std::string_view vowel_sounds = word ? "AEIOU" : "AEFHILMNORSX8";
  return vowel_sounds.find(c) != std::string_view::npos ? "an" : "a";
}

}  // namespace

std::string format_gpu_routing(const v1::JobSpec& spec) {
  if (spec.gpu_model().empty() && spec.gpu_uuid().empty() && spec.labels_size() == 0) return "";
  std::string out =
      spec.gpu_model().empty() ? "a GPU" : article_for(spec.gpu_model()) + " " + spec.gpu_model() + " GPU";
  std::vector<std::string> with;
  if (!spec.gpu_uuid().empty()) with.push_back("uuid " + spec.gpu_uuid());
  if (spec.labels_size() > 0) {
    std::string labels;
    for (const auto& label : spec.labels()) labels += (labels.empty() ? "" : ", ") + label;
    with.push_back((spec.labels_size() > 1 ? "labels " : "label ") + labels);
  }
  for (std::size_t i = 0; i < with.size(); ++i) out += (i == 0 ? " with " : " and ") + with[i];
  return out;
}

std::string format_gpu_choice(const v1::JobSpec& spec) {
  const std::string routing = format_gpu_routing(spec);
  std::string where;
  for (int g : spec.gpus()) where += (where.empty() ? "GPU " : ", ") + std::to_string(g);
  if (where.empty())
    where = routing.empty() ? "any GPU free" : routing;
  else if (!routing.empty())
    where += ", which must be " + routing;
  if (spec.split_gpus()) where += ", split across two (--split-gpus)";
  return where;
}

std::string format_jobs_table(const std::vector<v1::Job>& jobs, std::int64_t now_ms) {
  Table table{{"ID", "KIND", "STATE", "BUILD", "PROFILE", "VERDICT", "RATIO", "CREATED", "AGE", "DISPOSITION", "HOST"},
              {true, false, false, false, false, false, true, false, true, false, false},
              {}};
  for (const auto& job : jobs) {
    const bool has_verdict = job.has_verdict() && job.verdict().verdict() != v1::VERDICT_UNSPECIFIED;
    double ratio = has_verdict ? job.verdict().ratio() : job.progress().ratio();
    table.rows.push_back(
        {std::to_string(job.id()), std::string(words::spec_word(job.spec().kind())), state_name(job.state()),
         job.build().metadata().name().empty() ? "-" : job.build().metadata().name(),
         job.spec().profile().empty() ? "default" : job.spec().profile(),
         has_verdict ? verdict_name(job.verdict().verdict()) : "-", format_ratio(ratio),
         format_timestamp(job.created_unix_ms()), format_age(now_ms, job.created_unix_ms()),
         disposition_name(job.disposition()), job.host().empty() ? "-" : job.host()});
  }
  return format_table(table);
}

namespace {

std::string build_summary(const v1::Build& build) {
  if (build.id() == 0 && build.metadata().name().empty()) return "-";
  std::string out = fmt::format("{} (id {}, sha256 {}, {}", build.metadata().name(), build.id(),
                                build.sha256().substr(0, 12), format_bytes(build.size_bytes()));
  if (!build.metadata().commit().empty()) out += ", commit " + build.metadata().commit();
  if (!build.metadata().branch().empty()) out += ", branch " + build.metadata().branch();
  if (!build.metadata().flags().empty()) out += ", flags " + build.metadata().flags();
  return out + ")";
}

std::string or_default(std::int64_t value) {
  return value == 0 ? "default" : std::to_string(value);
}

}  // namespace

std::string format_job_details(const v1::Job& job, std::int64_t now_ms) {
  const auto& spec = job.spec();
  std::vector<std::pair<std::string, std::string>> fields;
  fields.emplace_back("job", fmt::format("{} ({}), {}", job.id(), words::spec_word(spec.kind()),
                                         state_name(job.state())));
  fields.emplace_back("build", build_summary(job.build()));
  if (spec.kind() == v1::JOB_KIND_GATE || spec.command().toggle() == v1::COMMAND_TOGGLE_BUILDS)
    fields.emplace_back("baseline", job.has_baseline() ? build_summary(job.baseline())
                                                       : spec.baseline());
  std::string spec_text = fmt::format(
      "profile {}, tokens {}, path {}, order {}, timing {}, parity shapes {}, repetitions {}, seed {}, "
      "fresh process {}",
      spec.profile().empty() ? "default" : spec.profile(), or_default(spec.tokens()),
      spec.path().empty() ? "default" : spec.path(), words::spec_word(spec.order()), words::spec_word(spec.timing()),
      words::spec_word(spec.parity_shapes()), or_default(spec.repetitions()),
      spec.seed() == 0 ? std::string("default") : std::to_string(spec.seed()),
      spec.fresh_process() ? "yes" : "no");
  fields.emplace_back("spec", spec_text);
  // Where it may run (as asked) and where it ran (from its runs).
  std::string where = format_gpu_choice(spec);
  for (int i = 0; i < job.gpus_size(); ++i) where += (i == 0 ? "; ran on " : " and ") + format_gpu(job.gpus(i));
  fields.emplace_back("gpu", where);
  if (!job.host().empty()) fields.emplace_back("host", job.host() + " (its daemon claimed the job)");
  if (spec.kind() == v1::JOB_KIND_COMMAND) {
    const v1::CommandSpec& c = spec.command();
    auto joined = [](const auto& argv) {
      std::string out;
      for (const auto& w : argv) out += (out.empty() ? "" : " ") + (w.find(' ') == std::string::npos ? w : "'" + w + "'");
      return out;
    };
    std::string arms;
    switch (c.toggle()) {
      case v1::COMMAND_TOGGLE_COMMANDS: arms = "arm B runs: " + joined(c.argv_b()); break;
      case v1::COMMAND_TOGGLE_BUILDS: arms = "{build} = the candidate (A) and the baseline (B)"; break;
      default:
        arms = fmt::format("{}={}|{}", c.variable().empty() ? "MINFER_MMQ" : c.variable(),
                           c.value_a().empty() ? "1" : c.value_a(), c.value_b().empty() ? "0" : c.value_b());
    }
    fields.emplace_back("command", joined(c.argv()));
    fields.emplace_back("arms", arms);
    std::string read = "tok/s " + std::string(words::word(c.tokens_per_s().format() == v1::OUTPUT_FORMAT_UNSPECIFIED
                                                              ? v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON
                                                              : c.tokens_per_s().format()));
    if (!c.tokens_per_s().expression().empty()) read += " " + c.tokens_per_s().expression();
    if (c.output().format() != v1::OUTPUT_FORMAT_UNSPECIFIED)
      read += ", output " + std::string(words::word(c.output().format())) +
              (c.output().expression().empty() ? "" : " " + c.output().expression());
    fields.emplace_back("reads", read);
  }
  if (spec.has_policy()) {
    const auto& p = spec.policy();
    fields.emplace_back("policy",
                        fmt::format("slowdown threshold {}, pairs {}..{}, target half-width {}",
                                    p.slowdown_threshold() == 0 ? "default"
                                                                : fmt::format("{:g}", p.slowdown_threshold()),
                                    or_default(p.min_pairs()), or_default(p.max_pairs()),
                                    p.target_halfwidth() == 0 ? "default"
                                                              : fmt::format("{:g}", p.target_halfwidth())));
  }
  fields.emplace_back("created", fmt::format("{} ({} ago)", format_timestamp(job.created_unix_ms()),
                                             format_age(now_ms, job.created_unix_ms())));
  if (job.started_unix_ms() != 0) fields.emplace_back("started", format_timestamp(job.started_unix_ms()));
  if (job.finished_unix_ms() != 0) {
    std::string finished = format_timestamp(job.finished_unix_ms());
    if (job.started_unix_ms() != 0)
      finished += " (ran " +
                  format_duration((job.finished_unix_ms() - job.started_unix_ms()) / 1000) + ")";
    fields.emplace_back("finished", finished);
  }
  fields.emplace_back("phase", job.phase().empty() ? "-" : job.phase());
  if (job.has_progress())
    fields.emplace_back("progress", progress_line(job.id(), job.state(), job.progress()));
  if (job.attempts() > 1) fields.emplace_back("attempts", std::to_string(job.attempts()));
  if (!job.error().empty()) fields.emplace_back("error", job.error());
  if (job.disposition() != v1::DISPOSITION_UNSPECIFIED)
    fields.emplace_back("disposition", disposition_name(job.disposition()) +
                                           (job.disposition_detail().empty() ? "" : ": " + job.disposition_detail()));
  std::string out = format_fields(fields);
  if (job.has_verdict() && job.verdict().verdict() != v1::VERDICT_UNSPECIFIED)
    out += "\n" + format_verdict_report(job.verdict(), job.spec().kind(), job.spec().timing());
  return out;
}

std::string format_builds_table(const std::vector<v1::Build>& builds) {
  Table table{{"ID", "NAME", "SHA256", "SIZE", "COMMIT", "CREATED"},
              {true, false, false, true, false, false},
              {}};
  for (const auto& b : builds)
    table.rows.push_back({std::to_string(b.id()), b.metadata().name(), b.sha256().substr(0, 12),
                          format_bytes(b.size_bytes()),
                          b.metadata().commit().empty() ? "-" : b.metadata().commit(),
                          format_timestamp(b.created_unix_ms())});
  return format_table(table);
}

namespace {

std::string labels_text(const v1::DeviceStatus& d) {
  std::string out;
  for (const auto& label : d.labels()) out += (out.empty() ? "" : ", ") + label;
  return out;
}

/// "live" for the answering daemon's own GPU; "12s ago" for one another daemon published.
std::string seen_text(const v1::DeviceStatus& d, std::int64_t now_ms) {
  if (d.published_unix_ms() == 0) return "live";
  return format_duration((now_ms - d.published_unix_ms()) / 1000) + " ago";
}

}  // namespace

std::string format_device(const v1::DeviceStatus& d, std::int64_t now_ms) {
  auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  if (d.published_unix_ms() != 0) {
    // Another daemon's GPU: what it published, no live read.
    std::vector<std::pair<std::string, std::string>> fields{
        {"host", or_dash(d.host())},
        {"backend", or_dash(d.backend())},
        {"device", std::to_string(d.device())},
        {"name", or_dash(d.name())},
        {"uuid", or_dash(d.uuid())},
        {"labels", labels_text(d).empty() ? "none" : labels_text(d)},
        {"qgate version", or_dash(d.qgate_version())},
        {"running job", d.running_job_id() == 0 ? "none" : std::to_string(d.running_job_id())},
        {"cotenant", or_dash(d.cotenant())},
        {"gpu now", d.now().state().empty() ? "unavailable" : d.now().state()},
    };
    if (!d.now().reason().empty()) fields.emplace_back("why", d.now().reason());
    fields.emplace_back("published", fmt::format("{} ({}, by its daemon)", seen_text(d, now_ms),
                                                 format_timestamp(d.published_unix_ms())));
    return format_fields(fields);
  }
  std::vector<std::pair<std::string, std::string>> fields{
      {"host", or_dash(d.host())},
      {"backend", or_dash(d.backend())},
      {"device", std::to_string(d.device())},
      {"name", or_dash(d.name())},
      {"uuid", or_dash(d.uuid())},
      {"memory", d.memory_bytes() > 0 ? format_bytes(d.memory_bytes()) : "-"},
      {"driver", or_dash(d.driver_version())},
      {"qgate version", or_dash(d.qgate_version())},
      {"queued jobs", std::to_string(d.queued_jobs())},
      {"running job", d.running_job_id() == 0 ? "none" : std::to_string(d.running_job_id())},
      {"cotenant", or_dash(d.cotenant())},
      {"uptime", format_duration(d.uptime_s())},
  };
  // Labels only when the daemon has some: a daemon without --label looks as it always did.
  if (d.labels_size() > 0)
    fields.insert(fields.begin() + 5, std::pair<std::string, std::string>("labels", labels_text(d)));
  return format_fields(fields) + format_cotenant_now(d.now());
}

std::string format_devices(const std::vector<v1::DeviceStatus>& devices, std::int64_t now_ms) {
  if (devices.size() == 1) return format_device(devices.front(), now_ms);
  std::set<std::string> hosts;
  bool published = false;
  for (const auto& d : devices) {
    hosts.insert(d.host());
    published = published || d.published_unix_ms() != 0;
  }
  const bool fleet = published || hosts.size() > 1;
  auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  Table table;
  if (fleet) {
    table = Table{{"HOST", "GPU", "NAME", "UUID", "LABELS", "QUEUED", "ANY-GPU QUEUE", "RUNNING", "SPLIT JOB", "GPU NOW",
                   "SEEN"},
                  {false, true, false, false, false, true, true, true, true, false, false},
                  {}};
  } else {
    table = Table{{"GPU", "NAME", "UUID", "QUEUED", "ANY-GPU QUEUE", "RUNNING", "SPLIT JOB", "GPU NOW"},
                  {true, false, false, true, true, true, true, false},
                  {}};
  }
  for (const auto& d : devices) {
    // Another daemon publishes no queues: "-", not a 0 that reads as an empty queue.
    const bool live = d.published_unix_ms() == 0;
    std::vector<std::string> row{std::to_string(d.device()), or_dash(d.name()), or_dash(d.uuid()),
                                 live ? std::to_string(d.queued_jobs()) : "-",
                                 live ? std::to_string(d.queued_any_gpu()) : "-",
                                 d.running_job_id() == 0 ? "-" : std::to_string(d.running_job_id()),
                                 d.split_job_id() == 0 ? "-" : std::to_string(d.split_job_id()),
                                 d.now().state().empty() ? "unavailable" : d.now().state()};
    if (fleet) {
      row.insert(row.begin(), or_dash(d.host()));
      row.insert(row.begin() + 4, or_dash(labels_text(d)));
      row.push_back(seen_text(d, now_ms));
    }
    table.rows.push_back(std::move(row));
  }
  std::string out = format_table(table);
  for (const auto& d : devices) {
    const std::string title =
        fleet ? fmt::format("{} GPU {}", or_dash(d.host()), d.device()) : fmt::format("GPU {}", d.device());
    out += "\n" + title + ":\n" + format_device(d, now_ms);
  }
  return out;
}

std::string format_gpu(const v1::GpuRef& gpu) {
  std::string out = fmt::format("GPU {}", gpu.ordinal());
  if (!gpu.name().empty() || !gpu.uuid().empty())
    out += " (" + gpu.name() + (gpu.uuid().empty() ? "" : (gpu.name().empty() ? "" : ", ") + gpu.uuid()) + ")";
  return out;
}

std::string format_cotenant_now(const v1::CotenantNow& now) {
  std::vector<std::pair<std::string, std::string>> fields;
  fields.emplace_back("gpu now", now.state().empty() ? "unavailable" : now.state());
  if (!now.reason().empty()) fields.emplace_back("why", now.reason());
  if (now.state() != "unavailable" && !now.state().empty()) {
    std::string procs;
    for (const auto& p : now.foreign()) {
      if (!procs.empty()) procs += ", ";
      procs += fmt::format("{}[{}]@{}", p.name(), p.pid(),
                           p.sm_percent() < 0 ? std::string("?") : fmt::format("{:.0f}%", p.sm_percent()));
      if (p.used_memory_bytes() > 0) procs += " " + format_bytes(p.used_memory_bytes());
    }
    fields.emplace_back("foreign", procs.empty() ? "none" : procs);
    if (now.device_util_percent() >= 0) fields.emplace_back("device util", fmt::format("{:.0f}%", now.device_util_percent()));
    if (now.max_sm_clock_mhz() > 0)
      fields.emplace_back("sm clock", fmt::format("{} / {} MHz ({:.0f}%)", now.sm_clock_mhz(), now.max_sm_clock_mhz(),
                                                  100.0 * now.sm_clock_mhz() / now.max_sm_clock_mhz()));
    std::string reasons;
    for (const auto& r : now.clock_event_reasons()) reasons += (reasons.empty() ? "" : ", ") + r;
    fields.emplace_back("clock events", reasons.empty() ? "none" : reasons);
    if (now.temperature_c() > 0 || now.power_w() > 0)
      fields.emplace_back("temp, power", fmt::format("{} C, {:.0f} W", now.temperature_c(), now.power_w()));
    fields.emplace_back("last quiet", now.ms_since_quiet_window() < 0    ? std::string("never, since qgated started")
                                      : now.ms_since_quiet_window() == 0 ? std::string("now")
                                                                         : format_duration(now.ms_since_quiet_window() / 1000) + " ago");
  }
  fields.emplace_back("waiting jobs", std::to_string(now.waiting_jobs()));
  if (!now.policy().empty()) fields.emplace_back("quiet policy", now.policy());
  return format_fields(fields);
}

std::string trend_timing_name(v1::TimingMode timing) {
  // Imported results: no job timed them.
  return timing == v1::TIMING_MODE_UNSPECIFIED ? "-" : std::string(words::spec_word(timing));
}

std::vector<TrendGroup> group_trend(const std::vector<v1::TrendPoint>& points) {
  std::vector<const v1::TrendPoint*> sorted;
  for (const auto& p : points) sorted.push_back(&p);
  // Stable, so points with the same start keep the server's order.
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return a->started_unix_ms() < b->started_unix_ms();
  });
  std::vector<TrendGroup> groups;
  std::map<std::tuple<std::string, std::string, std::string, std::int64_t, int, std::string, std::string, std::string,
                      std::string>,
           std::size_t>
      index;
  for (const auto* p : sorted) {
    auto key = std::make_tuple(p->build_name(), p->path(), p->weight_type(), p->tokens(), static_cast<int>(p->timing()),
                               p->backend(), p->gpu_name(), p->settings(), p->host());
    auto [it, added] = index.try_emplace(key, groups.size());
    if (added) {
      TrendGroup group;
      group.build = p->build_name();
      group.path = p->path();
      group.weight_type = p->weight_type();
      group.tokens = p->tokens();
      group.timing = p->timing();
      group.backend = p->backend();
      group.gpu_name = p->gpu_name();
      group.settings = p->settings();
      group.host = p->host();
      group.low = group.high = p->tokens_per_s();
      groups.push_back(std::move(group));
    }
    TrendGroup& g = groups[it->second];
    g.tokens_per_s.push_back(p->tokens_per_s());
    g.contended.push_back(p->contended());
    g.last_unix_ms = std::max(p->started_unix_ms(), p->last_unix_ms());
    // A point from a daemon that sends no count is one run.
    const bool summary = p->runs() > 0;
    g.runs += summary ? p->runs() : 1;
    g.contended_runs += summary ? p->contended_runs() : (p->contended() ? 1 : 0);
    g.low = std::min(g.low, summary ? p->tokens_per_s_low() : p->tokens_per_s());
    g.high = std::max(g.high, summary ? p->tokens_per_s_high() : p->tokens_per_s());
  }
  return groups;
}

std::string format_import(const v1::ImportResultsResponse& response, const std::string& format, std::size_t skipped) {
  const bool checks = response.checks_added() > 0 || response.check_jobs_already_stored() > 0;
  std::string out;
  if (!checks || response.runs_added() > 0 || response.runs_already_stored() > 0) {
    out = fmt::format("imported {} run{} as {}", response.runs_added(), response.runs_added() == 1 ? "" : "s", format);
    if (response.runs_already_stored() > 0)
      out += fmt::format(" ({} already stored, not added again)", response.runs_already_stored());
    if (skipped > 0) out += fmt::format(" ({} row{} skipped: other ops or unsupported)", skipped, skipped == 1 ? "" : "s");
    out += "\n";
    skipped = 0;  // said
  }
  // Correctness checks (test-backend-ops' test mode): a finished parity job per build.
  if (checks) {
    out += fmt::format("imported {} correctness check{} ({} incorrect) as {}", response.checks_added(),
                       response.checks_added() == 1 ? "" : "s", response.checks_failed(), format);
    if (response.check_jobs_already_stored() > 0)
      out += fmt::format(" ({} parity job{} already stored, not added again)", response.check_jobs_already_stored(),
                         response.check_jobs_already_stored() == 1 ? "" : "s");
    if (skipped > 0) out += fmt::format(" ({} row{} skipped: other modes)", skipped, skipped == 1 ? "" : "s");
    out += "\n";
  }
  for (const auto& b : response.builds()) out += fmt::format("  build {} (id {}, external)\n", b.metadata().name(), b.id());
  for (const auto& p : response.profiles()) out += fmt::format("  see: qgate trend --profile '{}'\n", p);
  for (const auto id : response.check_job_ids()) out += fmt::format("  see: qgate show {}\n", id);
  return out;
}

std::string format_trend(const std::vector<v1::TrendPoint>& points) {
  if (points.empty()) return "no runs match\n";
  Table table{{"BUILD", "PATH", "TYPE", "TOKENS", "TIMING", "BACKEND", "GPU", "RUNS", "MEDIAN tok/s", "MIN", "MAX", "LAST", "TREND"},
              {false, false, false, true, false, false, false, true, true, true, true, false, false},
              {}};
  std::int64_t contended_total = 0;
  const std::vector<TrendGroup> groups = group_trend(points);
  // Imported series with settings of their own (llama-bench's n_batch, flash_attn, ...) show them.
  const bool with_settings =
      std::any_of(groups.begin(), groups.end(), [](const TrendGroup& g) { return !g.settings.empty(); });
  if (with_settings) {
    table.headers.insert(table.headers.begin() + 7, "SETTINGS");
    table.right_align.insert(table.right_align.begin() + 7, false);
  }
  // Points from more than one host (a fleet's history) say whose GPU measured them.
  std::set<std::string> hosts;
  for (const auto& g : groups) hosts.insert(g.host);
  const bool with_host = hosts.size() > 1;
  if (with_host) {
    table.headers.insert(table.headers.begin() + 7, "HOST");
    table.right_align.insert(table.right_align.begin() + 7, false);
  }
  for (const auto& g : groups) {
    contended_total += g.contended_runs;
    const auto [lo, hi] = std::minmax_element(g.tokens_per_s.begin(), g.tokens_per_s.end());
    std::string runs = std::to_string(g.runs);
    if (g.contended_runs > 0) runs += fmt::format(" ({}*)", g.contended_runs);
    table.rows.push_back({g.build, g.path.empty() ? "-" : g.path, g.weight_type.empty() ? "all" : g.weight_type,
                          g.tokens > 0 ? std::to_string(g.tokens) : "-",
                          trend_timing_name(g.timing), g.backend.empty() ? "-" : g.backend,
                          g.gpu_name.empty() ? "-" : g.gpu_name, runs, format_tokens_per_s(median(g.tokens_per_s)),
                          format_tokens_per_s(g.low), format_tokens_per_s(g.high), format_timestamp(g.last_unix_ms),
                          sparkline(g.tokens_per_s, *lo, *hi)});
    if (with_settings) table.rows.back().insert(table.rows.back().begin() + 7, g.settings.empty() ? "-" : g.settings);
    if (with_host) table.rows.back().insert(table.rows.back().begin() + 7, g.host.empty() ? "-" : g.host);
  }
  std::string out = format_table(table);
  if (contended_total > 0)
    out += fmt::format(
        "* {} contended run(s) included: measured while another process used the GPU\n",
        contended_total);
  out += series_tokens_per_s_note() + "; trend oldest to newest, scaled per row\n";
  return out;
}

namespace {

/// Every line of `text` (each ending in '\n') with `prefix` in front.
std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start) out += prefix;
    out += c;
    line_start = c == '\n';
  }
  return out;
}

std::string detector_note(const v1::QueryChangesResponse& response) {
  return fmt::format("changes: E-divisive means over per-build medians of uncontended runs (quiet or of unknown "
                     "load), permutation p < {:g} ({} "
                     "permutations), at least {} builds per level\n",
                     response.alpha(), response.permutations(), response.min_segment());
}

}  // namespace

std::string format_changes(const v1::QueryChangesResponse& response) {
  std::string out;
  for (const auto& series : response.series()) {
    out += fmt::format("\nseries  {}  ({} builds, {} uncontended runs)\n", series.series(), series.builds(),
                       series.runs());
    if (series.changes_size() == 0) {
      out += "  no changes\n";
      continue;
    }
    Table table{{"LAST BUILD BEFORE", "FIRST BUILD AFTER", "RATIO", "95% CI", "p", "BUILDS BEFORE/AFTER", "STARTED"},
                {false, false, true, false, true, true, false},
                {}};
    for (const auto& c : series.changes())
      table.rows.push_back({c.previous_build_name(), c.build_name(), format_ratio(c.ratio()),
                            format_interval(c.ci_low(), c.ci_high()), fmt::format("{:.3g}", c.p_value()),
                            fmt::format("{}/{}", c.builds_before(), c.builds_after()),
                            format_timestamp(c.started_unix_ms())});
    out += indent(format_table(table), "  ");
  }
  if (response.series_size() == 0) out += "\nno uncontended runs to look for changes in\n";
  return out + detector_note(response);
}

std::string format_regressions(const v1::QueryChangesResponse& response) {
  struct Row {
    std::int64_t started;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;
  int transient_rows = 0;
  for (const auto& series : response.series()) {
    const auto& changes = series.changes();
    for (int i = 0; i < changes.size(); ++i) {
      const v1::SeriesChange& c = changes[i];
      if (c.ratio() >= 1 || c.fixes_previous()) continue;
      // A dip that recovered is one event: the change after it that brought the level back.
      std::string fixed = "not yet";
      if (i + 1 < changes.size() && changes[i + 1].fixes_previous())
        fixed = fmt::format("{} ({} build{} slow)", changes[i + 1].build_name(), c.builds_after(),
                            c.builds_after() == 1 ? "" : "s");
      const double significance = response.correction().empty() ? c.p_value() : series.q_value();
      // How many builds carry the slowdown; one or two make it transient (SeriesChange.transient).
      const std::string slow_builds =
          c.transient() ? fmt::format("{} transient", c.slow_builds()) : std::to_string(c.slow_builds());
      if (c.transient()) ++transient_rows;
      rows.push_back({c.started_unix_ms(),
                      {c.previous_build_name(), c.build_name(), format_ratio(c.ratio()),
                       format_interval(c.ci_low(), c.ci_high()), fmt::format("{:.3g}", significance),
                       format_timestamp(c.started_unix_ms()), fixed, slow_builds, series.series()}});
    }
  }
  std::string note = detector_note(response);
  if (!response.correction().empty())
    note += fmt::format("across series: {} over {} series, false discovery rate {:g}; q is the series' adjusted p\n",
                        response.correction(), response.series_tested(), response.alpha());
  if (rows.empty()) return "no slowdowns\n" + note;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.started < b.started; });
  Table table{{"LAST BUILD BEFORE", "FIRST BUILD AFTER", "RATIO", "95% CI", response.correction().empty() ? "p" : "q",
               "STARTED", "FIXED BY", "SLOW BUILDS", "SERIES"},
              {false, false, true, false, true, false, false, false, false},
              {}};
  const size_t listed = rows.size();
  for (Row& r : rows) table.rows.push_back(std::move(r.cells));
  return format_table(table) + "ratio: new level / old (geometric means of per-build medians); < 1 is slower\n" +
         fmt::format("slow builds: builds on the slow level slower than halfway to it; transient: fewer than 3 ({} of {} "
                     "slowdown{}),\n  which a short real dip and a burst of contention the co-tenant sampler missed "
                     "both give\n",
                     transient_rows, listed, listed == 1 ? "" : "s") +
         note;
}

namespace {

std::string compare_side_line(const v1::CompareSide& side) {
  std::string jobs;
  for (int i = 0; i < side.job_ids_size() && i < 6; ++i) jobs += (i == 0 ? "" : ", ") + std::to_string(side.job_ids(i));
  if (side.job_ids_size() > 6) jobs += fmt::format(", +{}", side.job_ids_size() - 6);
  std::string line = fmt::format("{} run{} from {} job{}{}, {} tok/s", side.runs(), side.runs() == 1 ? "" : "s",
                                 side.jobs(), side.jobs() == 1 ? "" : "s", jobs.empty() ? "" : " (" + jobs + ")",
                                 format_tokens_per_s(side.tokens_per_s()));
  if (side.sd_log() > 0) line += fmt::format(", run-to-run sd {:.2f}%", 100 * side.sd_log());
  return line;
}

}  // namespace

std::string format_compare(const v1::CompareResponse& response) {
  auto name = [](const v1::Build& b) {
    return fmt::format("{} (id {}, sha256 {})", b.metadata().name(), b.id(),
                       b.sha256().substr(0, 12));
  };
  std::string out = format_fields({{"A", name(response.a())}, {"B", name(response.b())}});
  for (const auto& r : response.rows()) {
    out += "\nseries  " + r.series() + "\n";
    std::string unpaired = format_ratio(r.ratio());
    if (r.ci_low() != 0.0 || r.ci_high() != 0.0)
      unpaired += fmt::format("  95% {}  Welch df {:.1f}  Mann-Whitney p {:.3g}{}", format_interval(r.ci_low(), r.ci_high()),
                              r.welch_df(), r.mann_whitney_p(), r.mann_whitney_exact() ? " (exact)" : "");
    unpaired += "  " + comparison_name(r.comparison());
    out += "  across jobs, unpaired (each job's mean log tok/s one unit; Welch interval):\n";
    std::string fields = format_fields({{"A", compare_side_line(r.a())}, {"B", compare_side_line(r.b())},
                                        {"A/B", unpaired}});
    // Indent the block under its heading.
    for (std::size_t at = 0; at < fields.size();) {
      const std::size_t end = fields.find('\n', at);
      out += "    " + fields.substr(at, end - at + 1);
      at = end + 1;
    }
    if (r.paired_jobs_size() > 0) {
      out += "  within one job, paired (both builds were its arms; the job's own verdict):\n";
      Table table{{"    JOB", "PAIRS", "CONTENDED", "RATIO A/B", "INTERVAL", "COMPARISON"},
                  {false, true, true, true, true, false},
                  {}};
      for (const auto& j : r.paired_jobs())
        table.rows.push_back({fmt::format("    {}", j.job_id()), j.ratio() == 0.0 ? "-" : std::to_string(j.pairs()),
                              j.ratio() == 0.0 ? "-" : std::to_string(j.contended_pairs()), format_ratio(j.ratio()),
                              format_interval(j.ci_low(), j.ci_high()),
                              j.ratio() == 0.0 ? "no verdict" : comparison_name(j.comparison())});
      out += format_table(table);
    }
    for (const auto& n : r.notes()) out += "  note: " + n + "\n";
  }
  if (response.notes_size() > 0) out += "\n";
  for (const auto& n : response.notes()) out += "note: " + n + "\n";
  out += fmt::format(
      "\nSAME: the 95% interval lies within 1 +- {:.3g}%; DIFFERENT: it excludes 1 and Welch's p, Holm-corrected "
      "across the series judged, is under 0.05; else UNKNOWN. A verdict needs at least 3 jobs a side: runs of "
      "one job share its conditions, so a job (or an imported run) is the unit.\nRuns pair only inside one job "
      "(the paired table).\n",
      100 * (response.same_margin() > 0 ? response.same_margin() : 0.02));
  out += series_tokens_per_s_note() + "\n";
  return out;
}

std::string trend_csv(const std::vector<v1::TrendPoint>& points) {
  // New columns go at the end, so scripts that read the older ones by position keep working.
  std::string out = csv_row({"run_id", "job_id", "build", "sha256", "path", "profile", "backend",
                             "started_unix_ms", "started_utc", "tokens_per_s", "contended",
                             "cotenant_known", "timing", "tokens", "weight_type", "gpu", "commit", "runs",
                             "settings", "host"});
  for (const auto& p : points)
    out += csv_row({std::to_string(p.run_id()), std::to_string(p.job_id()), p.build_name(),
                    p.build_sha256(), p.path(), p.profile(), p.backend(),
                    std::to_string(p.started_unix_ms()), format_timestamp(p.started_unix_ms()),
                    fmt::format("{}", p.tokens_per_s()), p.contended() ? "true" : "false",
                    p.cotenant_known() ? "true" : "false", trend_timing_name(p.timing()),
                    std::to_string(p.tokens()), p.weight_type(), p.gpu_name(), p.commit_sha(),
                    std::to_string(p.runs()), p.settings(), p.host()});
  return out;
}

}  // namespace qgate::client
