// The short words of the worker protocol's enumerations, as the store keeps them and people read
// them: "mmq", "passed", "ties", "ggml", "not_elf". One table per enum, used by the worker and qgated.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/v1/worker.pb.h"

namespace qgate::words {

std::string_view word(v1::GemmPath path);                // mmq, f16, cublaslt, command ("unknown")
std::string_view word(v1::CaseOutcome outcome);          // passed, incorrect, error, not_supported, invalid_problem
std::string_view word(v1::ActivationKind activation);    // random (also for UNSPECIFIED), zero, outlier, tiny, ties, large
std::string_view word(v1::NumericsProfile numerics);     // qgate, ggml, ggml-cpu, unknown ("" for UNSPECIFIED)
/// Every profile's word, in the enum's order: the one list the CLIs offer and messages name.
const std::vector<std::string>& numerics_words();
std::optional<v1::NumericsProfile> numerics_from_word(std::string_view word);
std::string_view word(v1::OutputFormat format);         // json-pointer, regex, llama-bench-json, llama-bench-jsonl ("none")
std::optional<v1::OutputFormat> output_format_from_word(std::string_view word);
std::string_view word(v1::WorkerErrorKind kind);         // not_found, not_elf, ..., model_file ("unspecified")

}  // namespace qgate::words
