// The one error type of qgate-prefill: a message for stderr and whether it was the input's fault
// (a model or build that cannot be used: exit 2) or the run's (a build call that failed: exit 1).
#pragma once

#include <stdexcept>
#include <string>

namespace qgate::prefill {

class PrefillError : public std::runtime_error {
 public:
  enum class Kind { input, run };
  PrefillError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }
  /// 2 for input errors, 1 for run failures.
  int exit_code() const { return kind_ == Kind::input ? 2 : 1; }

 private:
  Kind kind_;
};

}  // namespace qgate::prefill
