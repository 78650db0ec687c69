// The worker protocol's enum words, one switch per enum.
#include "qgate/v1/record_words.h"

#include <utility>

namespace qgate::words {

std::string_view word(v1::GemmPath path) {
  switch (path) {
    case v1::GEMM_PATH_MMQ: return "mmq";
    case v1::GEMM_PATH_F16: return "f16";
    case v1::GEMM_PATH_CUBLASLT_F16: return "cublaslt";
    case v1::GEMM_PATH_COMMAND: return "command";
    default: return "unknown";
  }
}

namespace {
constexpr std::pair<v1::OutputFormat, std::string_view> kOutputFormatWords[] = {
    {v1::OUTPUT_FORMAT_JSON_POINTER, "json-pointer"},
    {v1::OUTPUT_FORMAT_REGEX, "regex"},
    {v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON, "llama-bench-json"},
    {v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL, "llama-bench-jsonl"}};
}  // namespace

std::string_view word(v1::OutputFormat format) {
  for (const auto& [value, w] : kOutputFormatWords)
    if (value == format) return w;
  return "none";
}

std::optional<v1::OutputFormat> output_format_from_word(std::string_view w) {
  for (const auto& [value, candidate] : kOutputFormatWords)
    if (candidate == w) return value;
  return std::nullopt;
}

std::string_view word(v1::CaseOutcome outcome) {
  switch (outcome) {
    case v1::CASE_OUTCOME_PASSED: return "passed";
    case v1::CASE_OUTCOME_INCORRECT: return "incorrect";
    case v1::CASE_OUTCOME_ERROR: return "error";
    case v1::CASE_OUTCOME_NOT_SUPPORTED: return "not_supported";
    case v1::CASE_OUTCOME_INVALID_PROBLEM: return "invalid_problem";
    default: return "unspecified";
  }
}

std::string_view word(v1::ActivationKind activation) {
  switch (activation) {
    case v1::ACTIVATION_KIND_ZERO: return "zero";
    case v1::ACTIVATION_KIND_OUTLIER: return "outlier";
    case v1::ACTIVATION_KIND_TINY: return "tiny";
    case v1::ACTIVATION_KIND_TIES: return "ties";
    case v1::ACTIVATION_KIND_LARGE: return "large";
    default: return "random";
  }
}

std::string_view word(v1::NumericsProfile numerics) {
  switch (numerics) {
    case v1::NUMERICS_PROFILE_QGATE: return "qgate";
    case v1::NUMERICS_PROFILE_GGML: return "ggml";
    case v1::NUMERICS_PROFILE_GGML_CPU: return "ggml-cpu";
    case v1::NUMERICS_PROFILE_UNKNOWN: return "unknown";
    default: return "";
  }
}

const std::vector<std::string>& numerics_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> out;
    for (int value = v1::NumericsProfile_MIN; value <= v1::NumericsProfile_MAX; ++value)
      if (v1::NumericsProfile_IsValid(value) && value != v1::NUMERICS_PROFILE_UNSPECIFIED)
        out.emplace_back(word(v1::NumericsProfile(value)));
    return out;
  }();
  return words;
}

std::optional<v1::NumericsProfile> numerics_from_word(std::string_view text) {
  for (int value = v1::NumericsProfile_MIN; value <= v1::NumericsProfile_MAX; ++value)
    if (v1::NumericsProfile_IsValid(value) && value != v1::NUMERICS_PROFILE_UNSPECIFIED &&
        word(v1::NumericsProfile(value)) == text)
      return v1::NumericsProfile(value);
  return std::nullopt;
}

std::string_view word(v1::WorkerErrorKind kind) {
  switch (kind) {
    case v1::WORKER_ERROR_KIND_NOT_FOUND: return "not_found";
    case v1::WORKER_ERROR_KIND_NOT_ELF: return "not_elf";
    case v1::WORKER_ERROR_KIND_DLOPEN_FAILED: return "dlopen_failed";
    case v1::WORKER_ERROR_KIND_MISSING_SYMBOL: return "missing_symbol";
    case v1::WORKER_ERROR_KIND_ABI_MISMATCH: return "abi_mismatch";
    case v1::WORKER_ERROR_KIND_INVALID_ARGUMENT: return "invalid_argument";
    case v1::WORKER_ERROR_KIND_INVALID_REQUEST: return "invalid_request";
    case v1::WORKER_ERROR_KIND_DEVICE: return "device";
    case v1::WORKER_ERROR_KIND_UNKNOWN_NUMERICS: return "unknown_numerics";
    case v1::WORKER_ERROR_KIND_MODEL_FILE: return "model_file";
    case v1::WORKER_ERROR_KIND_CHANNEL_TAMPERED: return "channel_tampered";
    case v1::WORKER_ERROR_KIND_BAD_DECLARATION: return "bad_declaration";
    default: return "unspecified";
  }
}

}  // namespace qgate::words
