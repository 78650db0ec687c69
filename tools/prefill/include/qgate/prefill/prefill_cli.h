// qgate-prefill's command line: `run` (a timed prefill of a GGUF model through a kernel build,
// llama-bench JSON on stdout) and `write-model` (a test model with real quantized tensors).
// Exit codes: 0 done, 1 a build call failed during the run, 2 bad usage or an unusable model,
// build or device.
#pragma once

namespace qgate::prefill {

int run_prefill_cli(int argc, char** argv);

}  // namespace qgate::prefill
