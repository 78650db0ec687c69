// The bench tools' command lines: flags read one by one, a flag's value and a positive number, each
// refused through the tool's own usage error, which names the flag.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace qgate::db::bench {

class BenchArguments {
 public:
  using UsageError = void (*)(const std::string& message);  // prints the usage and exits

  /// Reads argv from index `first`.
  BenchArguments(int argc, char** argv, int first, UsageError usage_error)
      : argc_(argc), argv_(argv), at_(first - 1), usage_error_(usage_error) {}

  /// Moves to the next flag; false when there is none.
  bool next() {
    if (++at_ >= argc_) return false;
    flag_ = argv_[at_];
    return true;
  }
  std::string_view flag() const { return flag_; }

  /// The word after the flag.
  std::string value() {
    if (at_ + 1 >= argc_) refuse(fmt::format("{} needs a value", flag_));
    return argv_[++at_];
  }

  /// The word after the flag, a whole number in [1, max].
  std::int64_t positive(std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    const std::string text = value();
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || parsed <= 0 || parsed > max)
      refuse(fmt::format("{} needs a positive integer, got '{}'", flag_, text));
    return parsed;
  }

 private:
  [[noreturn]] void refuse(const std::string& message) const {
    usage_error_(message);
    std::exit(2);
  }

  int argc_;
  char** argv_;
  int at_;
  std::string_view flag_;
  UsageError usage_error_;
};

}  // namespace qgate::db::bench
