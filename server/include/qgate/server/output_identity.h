// The output-identity check of an A/B: every run's output (greedy tokens, or a command's text)
// against the first output of the job, token for token or byte for byte. The seed's gate asked the
// same of a 7B prefill: MMQ and f16 must produce the same greedy tokens. The result names the first
// position that differs and the runs that differed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgate/v1/harness.pb.h"

namespace qgate::server {

class OutputIdentityCheck {
 public:
  /// A run whose greedy tokens miss the head's exact winners in more than this share of rows
  /// fails the check even when every run agrees: its logits are wrong on both arms alike (a
  /// correct build misses none: each winner leads by 8 sigma of int8 activation error).
  static constexpr double kMaxOffTargetShare = 0.25;
  /// One stored run of `arm` ("A" or "B"), the `index`-th of that arm.
  void add(const std::string& arm, int index, const v1::ProfileRun& run);
  /// Unchecked when no run had an output.
  v1::OutputIdentity result() const;

 private:
  struct Output {
    std::string arm;
    int index = 0;
    bool present = false;
    bool is_tokens = false;
    std::vector<int64_t> tokens;
    std::string text;
    int64_t off_target = 0;  // rows whose token is not the head's exact winner (the judge's count)
    std::string name() const;
    int64_t length() const;
  };
  /// Where `b` first differs from `a` (-1 when identical), and the values there.
  static int64_t first_difference(const Output& a, const Output& b, std::string* values);

  std::vector<Output> outputs_;
};

}  // namespace qgate::server
