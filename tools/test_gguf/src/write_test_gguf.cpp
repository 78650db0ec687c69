// qgate_write_test_gguf: writes the llama-shaped test model (llama_test_tensors) to a file, for tests
// that drive the worker or the CLI with --gguf.
// Usage: qgate_write_test_gguf OUT.gguf [--alignment N] [--seed S] [--version 2|3]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "qgate/testing/gguf_test_model.h"

int main(int argc, char** argv) {
  using namespace qgate::profiles::testing;
  if (argc < 2 || std::string(argv[1]).starts_with("-")) {
    std::fprintf(stderr, "usage: %s OUT.gguf [--alignment N] [--seed S] [--version 2|3]\n", argv[0]);
    return 2;
  }
  GgufTestOptions options;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    const unsigned long long v = std::strtoull(argv[++i], nullptr, 10);
    if (a == "--alignment") {
      options.alignment = static_cast<uint32_t>(v);
    } else if (a == "--seed") {
      options.seed = v;
    } else if (a == "--version") {
      options.version = static_cast<uint32_t>(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    const GgufTestFile f = make_test_gguf(llama_test_tensors(), options);
    std::string error;
    if (!write_file(argv[1], f.bytes, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
    std::printf("%s: %zu tensors, %zu bytes, alignment %u\n", argv[1], f.tensors.size(), f.bytes.size(), f.alignment);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
