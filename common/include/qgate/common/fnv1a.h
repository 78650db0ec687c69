// FNV-1a 64: a tiny hash fixed by its definition, so a value computed from it (a stored series key,
// a test case's seed) is the same on every platform, standard library and release.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qgate::common {

/// FNV-1a 64 of `size` bytes at `data`.
uint64_t fnv1a64(const void* data, size_t size);
/// FNV-1a 64 of the bytes of `text`.
inline uint64_t fnv1a64(std::string_view text) { return fnv1a64(text.data(), text.size()); }

}  // namespace qgate::common
