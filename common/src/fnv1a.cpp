// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
#include "qgate/common/fnv1a.h"

namespace qgate::common {

uint64_t fnv1a64(const void* data, size_t size) {
  constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t hash = kOffsetBasis;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kPrime;
  }
  return hash;
}

}  // namespace qgate::common
