// OutputIdentityCheck: each run's output against the job's first, and the first position that differs.
#include "qgate/server/output_identity.h"

#include <algorithm>

namespace qgate::server {
namespace {

std::string text_at(const std::string& text, int64_t at) {
  if (at >= int64_t(text.size())) return "(end)";
  const std::string piece = text.substr(size_t(at), 16);
  std::string shown;
  for (char c : piece) shown += (c == '\n') ? std::string("\\n") : std::string(1, c);
  return "\"" + shown + "\"";
}

}  // namespace

std::string OutputIdentityCheck::Output::name() const { return "arm " + arm + " run " + std::to_string(index + 1); }

int64_t OutputIdentityCheck::Output::length() const {
  return is_tokens ? int64_t(tokens.size()) : int64_t(text.size());
}

void OutputIdentityCheck::add(const std::string& arm, int index, const v1::ProfileRun& run) {
  Output out;
  out.arm = arm;
  out.index = index;
  out.present = run.has_output();
  out.is_tokens = run.output_tokens_size() > 0 || (run.has_output() && run.output_text().empty());
  out.tokens.assign(run.output_tokens().begin(), run.output_tokens().end());
  out.text = run.output_text();
  out.off_target = run.output_off_target();
  outputs_.push_back(std::move(out));
}

int64_t OutputIdentityCheck::first_difference(const Output& a, const Output& b, std::string* values) {
  if (!b.present) {
    *values = "it produced no output";
    return 0;
  }
  if (a.is_tokens != b.is_tokens) {
    *values = std::string("one is ") + (a.is_tokens ? "tokens" : "text") + ", the other " +
              (b.is_tokens ? "tokens" : "text");
    return 0;
  }
  const int64_t common = std::min(a.length(), b.length());
  int64_t at = -1;
  if (a.is_tokens) {
    const auto mismatch = std::mismatch(a.tokens.begin(), a.tokens.begin() + common, b.tokens.begin());
    if (mismatch.first != a.tokens.begin() + common) at = mismatch.first - a.tokens.begin();
  } else {
    const auto mismatch = std::mismatch(a.text.begin(), a.text.begin() + common, b.text.begin());
    if (mismatch.first != a.text.begin() + common) at = mismatch.first - a.text.begin();
  }
  if (at < 0 && a.length() == b.length()) return -1;
  if (at < 0) at = common;  // one is a prefix of the other
  auto value = [&](const Output& o) {
    if (!o.is_tokens) return text_at(o.text, at);
    return at < int64_t(o.tokens.size()) ? std::to_string(o.tokens[size_t(at)]) : std::string("(end)");
  };
  *values = value(a) + " vs " + value(b) + " (lengths " + std::to_string(a.length()) + " and " +
            std::to_string(b.length()) + ")";
  return at;
}

v1::OutputIdentity OutputIdentityCheck::result() const {
  v1::OutputIdentity identity;
  identity.set_first_difference(-1);
  const auto first = std::find_if(outputs_.begin(), outputs_.end(), [](const Output& o) { return o.present; });
  if (first == outputs_.end()) return identity;
  identity.set_checked(true);
  identity.set_unit(first->is_tokens ? "token" : "byte");
  identity.set_length(first->length());
  identity.set_compared_runs(int64_t(outputs_.size()));
  int differing = 0;
  std::string detail;
  for (const Output& o : outputs_) {
    if (&o == &*first) continue;
    std::string values;
    const int64_t at = first_difference(*first, o, &values);
    if (at < 0) continue;
    ++differing;
    if (identity.first_difference() < 0 || at < identity.first_difference()) {
      identity.set_first_difference(at);
      detail = o.name() + " differs from " + first->name() + " at " + identity.unit() + " " + std::to_string(at) +
               ": " + values;
    }
  }
  // Runs that agree can still all be wrong: the head's exact winners are the judge's to know.
  const Output* worst = nullptr;
  for (const Output& o : outputs_)
    if (o.present && o.is_tokens && (!worst || o.off_target > worst->off_target)) worst = &o;
  if (worst && double(worst->off_target) > kMaxOffTargetShare * double(worst->length())) {
    identity.set_identical(false);
    if (identity.first_difference() < 0) identity.set_first_difference(0);
    identity.set_detail(worst->name() + ": " + std::to_string(worst->off_target) + " of " +
                        std::to_string(worst->length()) +
                        " greedy tokens are not the ones the output head's exact logits pick" +
                        (differing == 0 ? " (every run agrees: the logits are wrong alike on both arms)"
                                        : "; and " + detail));
    return identity;
  }
  identity.set_identical(differing == 0);
  if (differing == 0)
    identity.set_detail("all " + std::to_string(outputs_.size()) + " runs produced the same " +
                        std::to_string(first->length()) + " " + identity.unit() + (first->length() == 1 ? "" : "s"));
  else
    identity.set_detail(detail + " (" + std::to_string(differing) + " of " + std::to_string(outputs_.size() - 1) +
                        " runs differ)");
  return identity;
}

}  // namespace qgate::server
