// Verdict and Comparison between the domain and the API (verdict_words.h).
#include "qgate/v1/verdict_words.h"

namespace qgate::words {

v1::Verdict to_proto(Verdict verdict) {
  switch (verdict) {
    case Verdict::Pass: return v1::VERDICT_PASS;
    case Verdict::Fail: return v1::VERDICT_FAIL;
    case Verdict::Inconclusive: return v1::VERDICT_INCONCLUSIVE;
  }
  return v1::VERDICT_INCONCLUSIVE;
}

Verdict from_proto(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_PASS: return Verdict::Pass;
    case v1::VERDICT_FAIL: return Verdict::Fail;
    default: return Verdict::Inconclusive;
  }
}

v1::Comparison to_proto(Comparison comparison) {
  switch (comparison) {
    case Comparison::Same: return v1::COMPARISON_SAME;
    case Comparison::Different: return v1::COMPARISON_DIFFERENT;
    case Comparison::Unknown: return v1::COMPARISON_UNKNOWN;
  }
  return v1::COMPARISON_UNKNOWN;
}

Comparison from_proto(v1::Comparison comparison) {
  switch (comparison) {
    case v1::COMPARISON_SAME: return Comparison::Same;
    case v1::COMPARISON_DIFFERENT: return Comparison::Different;
    default: return Comparison::Unknown;
  }
}

std::string_view verdict_word(v1::Verdict verdict) {
  return verdict == v1::VERDICT_UNSPECIFIED ? "-" : to_string(from_proto(verdict));
}

std::string_view comparison_word(v1::Comparison comparison) {
  return comparison == v1::COMPARISON_UNSPECIFIED ? "-" : to_string(from_proto(comparison));
}

}  // namespace qgate::words
