// CompareBuilds: groups two builds' runs into series, refuses when no series has both, and compares each
// matched series across jobs (unpaired, on log tok/s) and within the jobs that ran both builds (paired).
#include "qgate/jobs/compare_builds.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "qgate/jobs/job_messages.h"
#include "qgate/jobs/series_fields_message.h"
#include "qgate/stats/ab_statistics.h"
#include "qgate/stats/multiplicity.h"

namespace qgate::jobs {
namespace {

std::string number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string build_label(const char* side, const db::Build& b) {
  return std::string(side) + " (" + b.name + ", build " + std::to_string(b.id) + ")";
}

std::string short_uuid(const std::string& uuid) { return uuid.size() > 12 ? uuid.substr(0, 12) : uuid; }

/// One run as the comparison sees it.
struct RunPoint {
  std::optional<std::int64_t> job_id;
  std::string arm;  // "A" | "B" in the job; "" outside an A/B
  int pair_index = 0;
  double tokens_per_s = 0;
  std::optional<bool> contended;
};

struct Collected {
  std::vector<RunPoint> included;
  int contended_left_out = 0;
};

using SeriesMap = std::map<SeriesKey, Collected>;

/// Reads one build's runs (one store query) and files them by series.
SeriesMap collect(db::Store& store, const db::Build& build, const CompareOptions& options) {
  db::CompareRunsQuery query;
  query.build_id = build.id;
  query.profile = options.profile;
  query.tokens = options.tokens;
  query.weight_type = options.weight_type;
  query.host = options.host;
  SeriesMap series;
  for (const db::CompareRun& run : store.compare_runs(query)) {
    if (!std::isfinite(run.tokens_per_s) || run.tokens_per_s <= 0) continue;  // not a measurement
    const SeriesKey key = SeriesKey::of(run);
    Collected& c = series[key];
    if (run.contended.value_or(false) && !options.include_contended) {
      ++c.contended_left_out;
      continue;
    }
    c.included.push_back({run.job_id, run.arm.value_or(""), run.pair_index, run.tokens_per_s, run.contended});
  }
  return series;
}

bool has_included(const SeriesMap& m, const SeriesKey& k) {
  auto it = m.find(k);
  return it != m.end() && !it->second.included.empty();
}

std::vector<std::string> differing_fields(const SeriesKey& x, const SeriesKey& y) {
  std::vector<std::string> out;
  if (x.profile != y.profile) out.push_back("profile");
  if (x.tokens != y.tokens) out.push_back("tokens");
  if (x.backend != y.backend) out.push_back("backend");
  if (x.gpu_name != y.gpu_name)
    out.push_back("GPU model");
  else if (x.gpu_uuid != y.gpu_uuid)
    out.push_back("GPU (same model, another device)");
  if (x.path != y.path) out.push_back("path");
  if (x.weight_type != y.weight_type) out.push_back("weight type");
  if (x.timing != y.timing) out.push_back("timing mode");
  if (x.settings != y.settings) out.push_back("settings");
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& last_separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? last_separator : ", ";
    out += parts[i];
  }
  return out;
}

/// "cuda on NVIDIA H200 ... at 512 tokens, ...; cpu on ..." for up to three series, then "and N more".
std::string list_series(const std::vector<SeriesKey>& keys) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < keys.size() && i < 3; ++i) parts.push_back(keys[i].describe());
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : "; ") + part;  // each description has commas
  if (keys.size() > 3) out += "; and " + std::to_string(keys.size() - 3) + " more";
  return out;
}

std::string filter_words(const CompareOptions& o) {
  std::vector<std::string> parts;
  if (o.profile) parts.push_back("profile " + *o.profile);
  if (o.tokens) parts.push_back(std::to_string(*o.tokens) + " tokens");
  if (o.weight_type) parts.push_back("type " + *o.weight_type);
  return parts.empty() ? "" : " with " + join(parts, " and ");
}

int left_out(const SeriesMap& m) {
  int n = 0;
  for (const auto& [key, c] : m) n += c.contended_left_out;
  return n;
}

std::vector<SeriesKey> keys_with_runs(const SeriesMap& m) {
  std::vector<SeriesKey> keys;
  for (const auto& [key, c] : m)
    if (!c.included.empty()) keys.push_back(key);
  return keys;
}

/// Why nothing is comparable, in one sentence per side and what differed.
std::string refusal(const db::Build& a, const db::Build& b, const SeriesMap& ma, const SeriesMap& mb,
                    const CompareOptions& options) {
  const std::string filters = filter_words(options);
  const std::vector<SeriesKey> ka = keys_with_runs(ma), kb = keys_with_runs(mb);
  auto empty_side = [&](const char* side, const db::Build& build, const SeriesMap& m) -> std::string {
    if (m.empty()) return build_label(side, build) + " has no finished timed runs" + filters;
    return build_label(side, build) + " has only contended runs" + filters + " (" + std::to_string(left_out(m)) +
           ", measured under co-tenant load; --include-contended takes them)";
  };
  std::vector<std::string> sentences;
  if (ka.empty()) sentences.push_back(empty_side("A", a, ma));
  if (kb.empty()) sentences.push_back(empty_side("B", b, mb));
  if (!sentences.empty()) return "nothing to compare: " + join(sentences, "; ");

  // Both have runs, on different series: say what each has and what the closest two differ in.
  std::vector<std::string> closest;
  bool first = true;
  for (const auto& x : ka)
    for (const auto& y : kb) {
      auto d = differing_fields(x, y);
      if (first || d.size() < closest.size()) closest = std::move(d);
      first = false;
    }
  std::string message = "nothing to compare: no series has " + std::string(options.include_contended ? "" : "quiet ") +
                        "runs of both builds. " + build_label("A", a) + " has runs on " + list_series(ka) + "; " +
                        build_label("B", b) + " only on " + list_series(kb) + ". They differ in " +
                        join(closest, " and ") + ".";
  // A series both have, left out because one side's runs there were all contended.
  for (const auto& x : ka)
    if (mb.count(x) && !has_included(mb, x))
      return message + " B's runs on " + x.describe() + " are all contended; --include-contended takes them.";
  for (const auto& y : kb)
    if (ma.count(y) && !has_included(ma, y))
      return message + " A's runs on " + y.describe() + " are all contended; --include-contended takes them.";
  return message;
}

SeriesSide summarize(const Collected& c) {
  SeriesSide s;
  std::map<std::int64_t, std::vector<double>> by_job;
  for (const RunPoint& p : c.included) {
    s.tokens_per_s.push_back(p.tokens_per_s);
    if (p.job_id) by_job[*p.job_id].push_back(p.tokens_per_s);
    else s.unit_tokens_per_s.push_back(p.tokens_per_s);  // an imported run is its own unit
    s.contended_runs += p.contended.value_or(false) ? 1 : 0;
    s.unknown_load_runs += p.contended.has_value() ? 0 : 1;
  }
  for (const auto& [job, runs] : by_job) {
    s.job_ids.push_back(job);
    s.unit_tokens_per_s.push_back(stats::geometric_mean(runs));
  }
  s.contended_left_out = c.contended_left_out;
  s.geomean = s.tokens_per_s.empty() ? 0 : stats::geometric_mean(s.tokens_per_s);
  return s;
}

Answer from_db(Comparison c) {
  return c == Comparison::Same ? Answer::same : c == Comparison::Different ? Answer::different : Answer::unknown;
}

/// The jobs whose arms were these two builds on this series, with the verdict each job reached on its
/// pairs: recomputing it here with another procedure could contradict what `qgate show JOB` says.
/// Read once per such job (there are few), oriented so that the ratio is always A / B.
std::vector<PairedJob> paired_jobs(db::Store& store, const Collected& a, const Collected& b) {
  std::map<std::int64_t, std::map<int, double>> by_job_a, by_job_b;
  std::map<std::int64_t, std::string> arm_of_a;
  for (const RunPoint& p : a.included)
    if (p.job_id) {
      by_job_a[*p.job_id][p.pair_index] = p.tokens_per_s;
      arm_of_a[*p.job_id] = p.arm;
    }
  for (const RunPoint& p : b.included)
    if (p.job_id) by_job_b[*p.job_id][p.pair_index] = p.tokens_per_s;
  std::vector<PairedJob> out;
  for (const auto& [job, runs_a] : by_job_a) {
    auto it = by_job_b.find(job);
    if (it == by_job_b.end()) continue;
    PairedJob j;
    j.job_id = job;
    for (const auto& [index, tps_a] : runs_a) j.quiet_pairs += it->second.count(index) ? 1 : 0;
    if (std::optional<db::Verdict> v = store.find_verdict(job); v && v->ratio && *v->ratio > 0) {
      const bool a_is_arm_b = arm_of_a[job] == "B";  // the job's ratio is arm A / arm B
      auto flip = [&](double x) { return a_is_arm_b && x > 0 ? 1 / x : x; };
      j.pairs = v->pairs;
      j.contended_pairs = v->contended_pairs;
      j.ratio = flip(*v->ratio);
      const double lo = flip(v->ci_low.value_or(0)), hi = flip(v->ci_high.value_or(0));
      j.lower = std::min(lo, hi);
      j.upper = std::max(lo, hi);
      j.answer = from_db(v->comparison);
    }
    out.push_back(j);
  }
  return out;
}

v1::Comparison to_proto(Answer a) {
  return a == Answer::same ? v1::COMPARISON_SAME : a == Answer::different ? v1::COMPARISON_DIFFERENT : v1::COMPARISON_UNKNOWN;
}

void fill_side(const SeriesSide& s, v1::CompareSide* out) {
  out->set_runs(int32_t(s.tokens_per_s.size()));
  out->set_jobs(int32_t(s.job_ids.size()));
  for (auto id : s.job_ids) out->add_job_ids(id);
  out->set_tokens_per_s(s.geomean);
  out->set_contended_runs(s.contended_runs);
  out->set_contended_left_out(s.contended_left_out);
  out->set_unknown_load_runs(s.unknown_load_runs);
}

}  // namespace

SeriesKey SeriesKey::of(const db::CompareRun& run) {
  SeriesKey key;
  static_cast<db::SeriesFields&>(key) = run;
  key.gpu_uuid = run.gpu_uuid;
  if (run.job_timing) key.timing = std::string(to_string(*run.job_timing));
  return key;
}

std::string SeriesKey::describe() const {
  std::string out = backend.empty() ? "unknown backend" : backend;
  if (!gpu_name.empty()) out += " on " + gpu_name;
  if (!gpu_uuid.empty()) out += " (" + short_uuid(gpu_uuid) + ")";
  out += " at " + std::to_string(tokens) + " tokens, profile " + (profile.empty() ? "-" : profile) + ", path " + path;
  if (weight_type) out += ", type " + *weight_type;
  out += timing.empty() ? ", imported" : ", " + timing + " timing";
  if (!settings.empty()) out += ", " + settings;
  return out;
}

Answer judge_unpaired(const stats::UnpairedRatio& r, double same_margin, bool significant) {
  if (r.lower >= 1 - same_margin && r.upper <= 1 + same_margin) return Answer::same;
  const bool excludes_one = r.lower > 1 || r.upper < 1;
  if (excludes_one && significant) return Answer::different;
  return Answer::unknown;
}

BuildComparison CompareBuilds::compare(const db::Build& a, const db::Build& b, const CompareOptions& options) const {
  if (a.id == b.id)
    throw std::invalid_argument("A and B are the same build (" + a.name + ", build " + std::to_string(a.id) +
                                "); compare two builds, or run an A/A gate of one");
  if (!(options.same_margin > 0 && options.same_margin < 0.5))
    throw std::invalid_argument("the SAME margin must be in (0, 0.5), got " + number("%g", options.same_margin));
  if (!(options.confidence > 0 && options.confidence < 1))
    throw std::invalid_argument("confidence must be in (0, 1)");
  if (options.tokens && *options.tokens <= 0) throw std::invalid_argument("tokens must be positive");

  const SeriesMap ma = collect(store_, a, options), mb = collect(store_, b, options);
  BuildComparison result;
  result.a = a;
  result.b = b;
  result.same_margin = options.same_margin;

  std::vector<SeriesKey> only_a, only_b;
  for (const auto& [key, ca] : ma) {
    if (ca.included.empty()) continue;
    if (!has_included(mb, key)) {
      only_a.push_back(key);
      continue;
    }
    const Collected& cb = mb.at(key);
    SeriesComparison s;
    s.key = key;
    s.a = summarize(ca);
    s.b = summarize(cb);
    const std::size_t units_a = s.a.unit_tokens_per_s.size(), units_b = s.b.unit_tokens_per_s.size();
    if (units_a >= kMinUnitsPerSide && units_b >= kMinUnitsPerSide) {
      s.unpaired = stats::estimate_unpaired_ratio(s.a.unit_tokens_per_s, s.b.unit_tokens_per_s, options.confidence);
      s.on_units = true;
    } else if (s.a.tokens_per_s.size() >= 2 && s.b.tokens_per_s.size() >= 2) {
      s.unpaired = stats::estimate_unpaired_ratio(s.a.tokens_per_s, s.b.tokens_per_s, options.confidence);
      s.notes.push_back(fmt::format(
          "no verdict: it needs at least {} jobs a side (A has {}, B {}). Runs of one job share its "
          "conditions, so the interval over runs shows run-to-run noise, not how far a build moves between "
          "jobs; more A/Bs of each build (qgate ab) give the jobs",
          kMinUnitsPerSide, units_a, units_b));
    } else {
      s.notes.push_back("an interval needs at least 2 runs on each side (A has " +
                        std::to_string(s.a.tokens_per_s.size()) + ", B " + std::to_string(s.b.tokens_per_s.size()) +
                        ")");
    }
    for (auto [side, name] : {std::pair{&s.a, "A"}, std::pair{&s.b, "B"}}) {
      if (side->unknown_load_runs > 0)
        s.notes.push_back(std::to_string(side->unknown_load_runs) + " of " + name +
                          "'s runs have unknown co-tenant load (no sampler) and are included");
      if (side->contended_runs > 0)
        s.notes.push_back(std::to_string(side->contended_runs) + " of " + name +
                          "'s runs were measured under co-tenant load (included on request)");
    }
    s.paired_jobs = paired_jobs(store_, ca, cb);
    result.series.push_back(std::move(s));
  }
  for (const auto& [key, cb] : mb)
    if (!cb.included.empty() && !has_included(ma, key)) only_b.push_back(key);

  if (result.series.empty()) throw NothingComparable(refusal(a, b, ma, mb, options));

  // Several series at once: DIFFERENT holds the chance of any false one at 1 - confidence (Holm).
  std::vector<double> p_values;
  std::vector<SeriesComparison*> judged;
  for (SeriesComparison& s : result.series) {
    if (!s.on_units) continue;
    p_values.push_back(s.unpaired->welch_p);
    judged.push_back(&s);
  }
  const std::vector<bool> rejected = stats::holm_rejections(p_values, 1 - options.confidence);
  for (std::size_t i = 0; i < judged.size(); ++i) {
    judged[i]->significant = rejected[i];
    judged[i]->answer = judge_unpaired(*judged[i]->unpaired, options.same_margin, rejected[i]);
  }
  if (judged.size() > 1)
    result.notes.push_back(fmt::format("DIFFERENT is held at {:g}% family-wise across the {} series judged (Holm)",
                                       100 * (1 - options.confidence), judged.size()));

  if (!only_a.empty())
    result.notes.push_back("A also has runs on " + std::to_string(only_a.size()) + " series B has none of: " +
                           list_series(only_a));
  if (!only_b.empty())
    result.notes.push_back("B also has runs on " + std::to_string(only_b.size()) + " series A has none of: " +
                           list_series(only_b));
  if (!options.include_contended && (left_out(ma) > 0 || left_out(mb) > 0))
    result.notes.push_back("quiet runs only: " + std::to_string(left_out(ma)) + " contended run(s) of A and " +
                           std::to_string(left_out(mb)) + " of B left out (--include-contended takes them)");
  return result;
}

v1::CompareResponse to_proto(const BuildComparison& c) {
  v1::CompareResponse out;
  *out.mutable_a() = to_proto(c.a);
  *out.mutable_b() = to_proto(c.b);
  out.set_same_margin(c.same_margin);
  for (const SeriesComparison& s : c.series) {
    v1::CompareRow* row = out.add_rows();
    write_series_fields(s.key, *row);
    row->set_gpu_uuid(s.key.gpu_uuid);
    row->set_timing(s.key.timing);
    row->set_series(s.key.describe());
    fill_side(s.a, row->mutable_a());
    fill_side(s.b, row->mutable_b());
    row->set_runs_a(int32_t(s.a.tokens_per_s.size()));
    row->set_runs_b(int32_t(s.b.tokens_per_s.size()));
    row->set_tokens_per_s_a(s.a.geomean);
    row->set_tokens_per_s_b(s.b.geomean);
    row->set_ratio(s.a.geomean / s.b.geomean);
    if (s.unpaired) {
      row->set_ratio(s.unpaired->ratio);
      row->set_ci_low(s.unpaired->lower);
      row->set_ci_high(s.unpaired->upper);
      row->set_welch_df(s.unpaired->df);
      row->set_mann_whitney_p(s.unpaired->mann_whitney_p);
      row->set_mann_whitney_exact(s.unpaired->mann_whitney_exact);
      row->mutable_a()->set_sd_log(s.unpaired->sd_log_a);
      row->mutable_b()->set_sd_log(s.unpaired->sd_log_b);
    }
    row->set_comparison(to_proto(s.answer));
    for (const PairedJob& j : s.paired_jobs) {
      v1::ComparePairedJob* p = row->add_paired_jobs();
      p->set_job_id(j.job_id);
      p->set_pairs(j.pairs);
      p->set_ratio(j.ratio);
      p->set_ci_low(j.lower);
      p->set_ci_high(j.upper);
      p->set_contended_pairs(j.contended_pairs);
      p->set_quiet_pairs(j.quiet_pairs);
      p->set_comparison(to_proto(j.answer));
    }
    for (const auto& n : s.notes) row->add_notes(n);
  }
  for (const auto& n : c.notes) out.add_notes(n);
  return out;
}

}  // namespace qgate::jobs
