// libFuzzer target: the GGUF header reader and the profile built from it, on arbitrary bytes.
// The reader promises (gguf.h) never to throw, never to read outside the buffer and to bound every
// allocation by the bytes present; ASan/UBSan and libFuzzer's -rss_limit_mb hold it to that.
#include <cstddef>
#include <cstdint>
#include <string>

#include "qgate/profiles/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qgate::profiles;
  std::string error;
  const auto header = parse_gguf_header(data, size, &error);
  if (header) {
    // A header that parses must also be safe to turn into a profile, under either naming rule.
    (void)profile_from_gguf(*header, "", &error);
    (void)profile_from_gguf(*header, "fuzz", &error);
    // Lookups walk the metadata the reader kept; they must stay within it.
    (void)header->find("general.architecture");
    (void)header->find("general.alignment");
  }
  // The buffer overload parses again on its own (it is what the CLI calls).
  (void)profile_from_gguf(data, size, "fuzz", &error);

  // Tight limits reach the "too many / too long" branches with small inputs.
  GgufLimits tight;
  tight.max_tensors = 8;
  tight.max_kv = 8;
  tight.max_key_length = 32;
  tight.max_name_length = 32;
  tight.max_string_length = 64;
  tight.max_array_length = 64;
  tight.max_array_depth = 2;
  tight.max_kept_array_elements = 4;
  (void)parse_gguf_header(data, size, nullptr, tight);
  return 0;
}
