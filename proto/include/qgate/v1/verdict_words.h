// The one seam between the domain's Verdict and Comparison (qgate/common/verdicts.h) and the API's
// enums of the same names (harness.proto), and their words for a message that may carry none.
#pragma once

#include <string_view>

#include "qgate/common/verdicts.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::words {

v1::Verdict to_proto(Verdict verdict);
Verdict from_proto(v1::Verdict verdict);  // UNSPECIFIED (a job with no verdict yet) reads as Inconclusive
v1::Comparison to_proto(Comparison comparison);
Comparison from_proto(v1::Comparison comparison);  // UNSPECIFIED reads as Unknown

/// The domain's word for a message's value ("PASS", "SAME"), or "-" for UNSPECIFIED.
std::string_view verdict_word(v1::Verdict verdict);
std::string_view comparison_word(v1::Comparison comparison);

}  // namespace qgate::words
